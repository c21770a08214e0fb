package depcheck

import (
	"bufio"
	"bytes"
	"os/exec"
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
// helpers (…test packages such as stacktest, pgstoretest, kafkaqtest) and
// seckill/testlog.
func testHelper(pkg string) bool {
	if folder(pkg) == "" {
		return false
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
			if folder(imp) == "" {
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

// The binaries link no test helper. (cmd/seckill does link the in-process
// Kafka broker of deploy/localstack, on purpose: `seckill dev` runs on it.)
func TestBinariesLinkNoTestHelper(t *testing.T) {
	for _, pkg := range goList(t, "-deps", "./cmd/...") {
		if testHelper(pkg) {
			t.Errorf("a binary under cmd/ links the test helper %s", pkg)
		}
	}
}
