package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/internal/server"
)

// TestREADMENamesProfileEnv: the README's section for people who profile (Benchmarks) names
// the environment variables that make a node profile itself.
func TestREADMENamesProfileEnv(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## Benchmarks\n")
	if !ok {
		t.Fatal("README.md has no Benchmarks section")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	for _, env := range []string{server.CPUProfileEnv, server.TraceEnv} {
		if !strings.Contains(sec, env) {
			t.Errorf("README.md's Benchmarks section does not name %s", env)
		}
	}
}
