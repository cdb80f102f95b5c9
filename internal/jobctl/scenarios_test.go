package jobctl

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// runScenarios runs every scenario file under dir (its README.txt aside), each against a
// fresh world from newWorld: the function that turns a command into its output.
func runScenarios(t *testing.T, dir string, newWorld func() func(*testing.T, *datadriven.TestData) string) {
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		if strings.HasSuffix(path, "README.txt") {
			return
		}
		datadriven.RunTest(t, path, newWorld())
	})
}
