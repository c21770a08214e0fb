package depcheck

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/flashsale/seckill"

// productDir is the product module's folder, from this package's.
const productDir = "../../.."

// goList runs `go list` with args in the product module and returns its
// lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = productDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// layerOf returns the index in Layers of the longest folder that pkg's path
// starts with, and that folder; ok is false for a package outside the
// product or in no listed folder.
func layerOf(pkg string) (layer int, folder string, ok bool) {
	rel, inModule := strings.CutPrefix(pkg, module+"/")
	if !inModule {
		return 0, "", false
	}
	for i, folders := range Layers {
		for _, f := range folders {
			if (rel == f || strings.HasPrefix(rel, f+"/")) && len(f) > len(folder) {
				layer, folder, ok = i, f, true
			}
		}
	}
	return layer, folder, ok
}

// testHelper says whether pkg exists only for tests: its name begins or
// ends with "test" (stacktest, pgstoretest, kafkaqtest, redisstocktest,
// testlog).
func testHelper(pkg string) bool {
	if !strings.HasPrefix(pkg, module+"/") {
		return false
	}
	name := pkg[strings.LastIndex(pkg, "/")+1:]
	return strings.HasPrefix(name, "test") || strings.HasSuffix(name, "test")
}

// Every package is in a layer and imports none of a higher one, and only
// test helpers import test helpers (a test file may import anything: it
// starts the services of deploy/devstack).
func TestImportsPointDown(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		from, fromFolder, ok := layerOf(pkg)
		if !ok {
			t.Errorf("%s is in no folder of depcheck.Layers", pkg)
			continue
		}
		for _, imp := range imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, toFolder, ok := layerOf(imp)
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is in no folder of depcheck.Layers", pkg, imp)
			case to > from:
				t.Errorf("%s imports %s: %s/ sits above %s/ (depcheck.Layers)", pkg, imp, toFolder, fromFolder)
			case testHelper(imp) && !testHelper(pkg):
				t.Errorf("%s imports the test helper %s outside its tests", pkg, imp)
			}
		}
	}
}

// No package below the face links the web framework, at any depth: the
// domains and the buy's pipeline can be read, and tested, without HTTP.
func TestBelowTheFaceNoHTTPFramework(t *testing.T) {
	face, _, ok := layerOf(module + "/" + Face)
	if !ok {
		t.Fatalf("depcheck.Face %q is no folder of depcheck.Layers", Face)
	}
	for _, line := range goList(t, "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "./...") {
		fields := strings.Fields(line)
		pkg, deps := fields[0], fields[1:]
		if layer, _, ok := layerOf(pkg); !ok || layer >= face {
			continue
		}
		for _, dep := range deps {
			if strings.HasPrefix(dep, "github.com/gofiber/") || strings.HasPrefix(dep, "github.com/valyala/fasthttp") {
				t.Errorf("%s links %s, though it sits below %s/ (depcheck.Face)", pkg, dep, Face)
				break
			}
		}
	}
}

// The face declares no JSON shape of its own: every object the API speaks is
// in seckill/api, where the domains that make them can use them too.
func TestFaceShapesInTheAPIPackage(t *testing.T) {
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}", "./"+Face+"/...") {
		fields := strings.Fields(line)
		pkg, dir, files := fields[0], fields[1], fields[2:]
		if testHelper(pkg) {
			continue
		}
		for _, name := range files {
			for _, typ := range jsonStructs(t, filepath.Join(dir, name)) {
				t.Errorf("%s/%s: %s has JSON tags: an object of the API belongs in seckill/api", strings.TrimPrefix(pkg, module+"/"), name, typ)
			}
		}
	}
}

// jsonStructs names the structs of file whose fields carry a json tag: the
// declared type's name, or "a struct in <func>" for one without a name.
func jsonStructs(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	within := "a struct"
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			within = "a struct in " + n.Name.Name
		case *ast.TypeSpec:
			if st, ok := n.Type.(*ast.StructType); ok && hasJSONTag(st) {
				out = append(out, n.Name.Name)
				return false
			}
		case *ast.StructType:
			if hasJSONTag(n) {
				out = append(out, within)
			}
		}
		return true
	})
	return out
}

func hasJSONTag(st *ast.StructType) bool {
	for _, fld := range st.Fields.List {
		if fld.Tag != nil && strings.Contains(fld.Tag.Value, `json:"`) {
			return true
		}
	}
	return false
}

// The binaries link no test helper.
func TestBinariesLinkNoTestHelper(t *testing.T) {
	for _, pkg := range goList(t, "-deps", "./cmd/...") {
		if testHelper(pkg) {
			t.Errorf("a binary under cmd/ links the test helper %s", pkg)
		}
	}
}

// The binary that serve runs in production, built as deploy/Dockerfile
// builds it, links neither the private services of dev mode
// (deploy/devstack) nor the in-process broker (kfake). The build's tags are
// read from the Dockerfile, so the rule follows the image; the development
// build (make build) keeps dev mode.
func TestProductionBinaryLinksNoDevMode(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join(productDir, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^RUN .*\bgo build\b(.*)\./cmd/seckill\s*$`).FindSubmatch(dockerfile)
	if build == nil {
		t.Fatal("deploy/Dockerfile has no `RUN ... go build ... ./cmd/seckill` line")
	}
	args := []string{"-deps"}
	if tags := regexp.MustCompile(`-tags[= ](\S+)`).FindSubmatch(build[1]); tags != nil {
		args = append(args, "-tags", string(tags[1]))
	}
	deps := goList(t, append(args, "./cmd/seckill")...)
	if len(deps) < 10 {
		t.Fatalf("go list %v: only %d packages", args, len(deps))
	}
	for _, pkg := range deps {
		for _, dev := range []string{module + "/deploy/devstack", "github.com/twmb/franz-go/pkg/kfake"} {
			if pkg == dev || strings.HasPrefix(pkg, dev+"/") {
				t.Errorf("the production build (go list %s ./cmd/seckill, as deploy/Dockerfile builds it) links %s", strings.Join(args, " "), pkg)
			}
		}
	}
}
