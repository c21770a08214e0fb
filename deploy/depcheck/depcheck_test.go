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
	"slices"
	"strings"
	"testing"
)

const module = "github.com/flashsale/seckill"

// goList runs `go list` with args from the module's root and returns its
// lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
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

// folder is the top folder of one of the module's packages ("" for others).
func folder(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

// testHelper says whether pkg exists only for tests: the shared test
// helpers (…test packages such as stacktest, pgstoretest, kafkaqtest,
// apitest), seckill/testlog and the packages of TestOnly.
func testHelper(pkg string) bool {
	if folder(pkg) == "" {
		return false
	}
	if slices.Contains(TestOnly, strings.TrimPrefix(pkg, module+"/")) {
		return true
	}
	last := pkg[strings.LastIndex(pkg, "/")+1:]
	return strings.HasSuffix(last, "test") && last != "loadtest" || pkg == module+"/seckill/testlog"
}

// No package imports one of a higher layer, test helpers included (a test
// file may: it starts the services of deploy/localstack), and only test
// helpers and tests import test helpers.
func TestImportsPointDown(t *testing.T) {
	layer := map[string]int{}
	for i, names := range Layers {
		for _, n := range names {
			layer[n] = i
		}
	}
	for _, line := range goList(t, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		from, ok := layer[folder(pkg)]
		if !ok {
			t.Errorf("%s: its folder %q is in no layer of depcheck.Layers", pkg, folder(pkg))
			continue
		}
		for _, imp := range imports {
			if folder(imp) == "" || vocabulary(imp) {
				continue
			}
			to, ok := layer[folder(imp)]
			switch {
			case !ok:
				t.Errorf("%s imports %s, whose folder is in no layer", pkg, imp)
			case to > from:
				t.Errorf("%s imports %s: %s/ sits above %s/ (depcheck.Layers)", pkg, imp, folder(imp), folder(pkg))
			case testHelper(imp) && !testHelper(pkg):
				t.Errorf("%s imports the test helper %s outside its tests", pkg, imp)
			}
		}
	}
}

// vocabulary says whether pkg is one of Vocabulary, which every layer may
// import.
func vocabulary(pkg string) bool {
	rel, ok := strings.CutPrefix(pkg, module+"/")
	return ok && slices.Contains(Vocabulary, rel)
}

// The packages of Vocabulary link nothing but the standard library, at any
// depth: not the module's other packages, not a driver, not Fiber.
func TestVocabularyImportsOnlyTheStandardLibrary(t *testing.T) {
	for _, pkg := range Vocabulary {
		deps := goList(t, "-deps", "-f", "{{.ImportPath}} {{.Standard}}", "./"+pkg)
		if !slices.Contains(deps, module+"/"+pkg+" false") {
			t.Errorf("depcheck.Vocabulary names %s, which is no package", pkg)
		}
		for _, line := range deps {
			dep, std, _ := strings.Cut(line, " ")
			if std != "true" && dep != module+"/"+pkg {
				t.Errorf("%s links %s: the vocabulary imports only the standard library (depcheck.Vocabulary)", pkg, dep)
			}
		}
	}
}

// Every struct with JSON tags in the product's folders is the API's, in
// gateway/api, or one of Messages: no face declares a wire shape of its own.
func TestAPIShapesInTheVocabulary(t *testing.T) {
	lines := goList(t, "-f", "{{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}",
		"./seckill/...", "./orders/...", "./notify/...", "./gateway/...")
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg, dir, files := fields[0], fields[1], fields[2:]
		rel := strings.TrimPrefix(pkg, module+"/")
		if vocabulary(pkg) || testHelper(pkg) {
			continue
		}
		for _, name := range files {
			for _, typ := range jsonStructs(t, filepath.Join(dir, name)) {
				if !slices.Contains(Messages[rel], typ) {
					t.Errorf("%s/%s: %s has JSON tags: an object of the API belongs in gateway/api, another message in depcheck.Messages", rel, name, typ)
				}
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
	var within []string // the names of the declarations being walked
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case nil:
			return false
		case *ast.FuncDecl:
			within = append(within[:0], "a struct in "+n.Name.Name)
		case *ast.TypeSpec:
			if st, ok := n.Type.(*ast.StructType); ok && hasJSONTag(st) {
				out = append(out, n.Name.Name)
				return false
			}
		case *ast.StructType:
			if hasJSONTag(n) {
				name := "a struct"
				if len(within) > 0 {
					name = within[0]
				}
				out = append(out, name)
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

// The packages of Below link none of the packages named beside them.
func TestBelowTheFace(t *testing.T) {
	for pkg, banned := range Below {
		deps := goList(t, "-deps", "./"+pkg)
		if len(deps) == 0 {
			t.Errorf("depcheck.Below names %s, which is no package", pkg)
		}
		for _, dep := range deps {
			for _, b := range banned {
				if dep == b || dep == module+"/"+b {
					t.Errorf("%s links %s (depcheck.Below)", pkg, dep)
				}
			}
		}
	}
}

// The binaries link no test helper. (The development build of cmd/seckill
// does link the in-process Kafka broker of deploy/localstack, on purpose:
// `seckill dev` runs on it; the production build does not, see
// TestProductionBinaryLinksNoTool.)
func TestBinariesLinkNoTestHelper(t *testing.T) {
	for _, pkg := range goList(t, "-deps", "./cmd/...") {
		if testHelper(pkg) {
			t.Errorf("a binary under cmd/ links the test helper %s", pkg)
		}
	}
}

// The binary that serve runs in production, built as deploy/Dockerfile
// builds it, links none of the tools: not the load tool, not the private
// services of dev mode (deploy/localstack) and not the in-process broker
// (kfake). The build's tags are read from the Dockerfile, so the rule
// follows the image; the development build (make build) keeps dev mode.
func TestProductionBinaryLinksNoTool(t *testing.T) {
	dockerfile, err := os.ReadFile("../Dockerfile")
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
	excluded := []string{
		module + "/deploy/loadtest",
		module + "/deploy/localstack",
		module + "/deploy/fleet",
		module + "/deploy/chaos",
		module + "/deploy/netlab",
		"github.com/twmb/franz-go/pkg/kfake",
	}
	for _, pkg := range deps {
		for _, tool := range excluded {
			if pkg == tool || strings.HasPrefix(pkg, tool+"/") {
				t.Errorf("the production build (go list %s ./cmd/seckill, as deploy/Dockerfile builds it) links %s", strings.Join(args, " "), pkg)
			}
		}
	}
}
