// Package pytests runs the Python package's tests (python/tests, pytest) from go test, so that
// the README's one test command, go test -timeout 20m ./..., runs them too.
//
// They need /usr/bin/python3 with numpy, scipy, scikit-learn, pandas and pytest (Debian's
// python3-numpy python3-scipy python3-sklearn python3-pandas python3-pytest; .ci/run installs
// them): without one of those the test is skipped, saying which; with them, a failing Python
// test fails it, printing pytest's output. The didnmf command they drive is built from this
// checkout (./cmd/didnmf) into a temporary directory and given to them as DIDNMF_BIN.
package pytests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// python is the interpreter the tests run under: Debian's, whose packages they need (the
// python3 first on PATH may be another one).
const python = "/usr/bin/python3"

// modules are the Python modules the tests import, with the Debian package of each.
var modules = [][2]string{
	{"numpy", "python3-numpy"},
	{"scipy", "python3-scipy"},
	{"sklearn", "python3-sklearn"},
	{"pandas", "python3-pandas"},
	{"pytest", "python3-pytest"},
}

func TestPython(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the Python package's tests (pytest, about a minute) are skipped")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is absent: the Python package's tests are skipped (apt-get install python3 python3-numpy python3-scipy python3-sklearn python3-pandas python3-pytest)", python)
	}
	var missing []string
	for _, m := range modules {
		if err := exec.Command(python, "-c", "import "+m[0]).Run(); err != nil {
			missing = append(missing, m[0]+" ("+m[1]+")")
		}
	}
	if len(missing) > 0 {
		t.Skipf("%s lacks %s: the Python package's tests are skipped", python, strings.Join(missing, ", "))
	}

	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "didnmf")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/didnmf")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/didnmf: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
	cmd.Dir = "." // python/, where this file is
	cmd.Env = append(os.Environ(),
		"DIDNMF_BIN="+bin,
		"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ in the checkout
		// the install test builds the command with go: make sure it finds this one
		"PATH="+filepath.Dir(goTool)+string(os.PathListSeparator)+os.Getenv("PATH"),
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -m pytest -q python/tests: %v (after %s)\n%s", python, err, time.Since(start).Round(time.Second), out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("pytest: %s (%s)", lines[len(lines)-1], time.Since(start).Round(time.Second))
}
