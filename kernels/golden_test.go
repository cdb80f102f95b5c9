package kernels

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata from this build's results")

// golden is one golden file of result hashes: what its hashes are of (the header line's
// words) and the test that rewrites it with -update.
type golden struct {
	path, what, test string
	// known, when set, excuses a hash that differs: it returns why (logged) and true. Nil
	// excuses nothing.
	known func(name string) (string, bool)
}

// check compares got (hash by case name) with the golden file, or rewrites the file with
// -update. Every differing, missing or extra name is reported at once.
func (g golden) check(t *testing.T, got map[string]string) {
	t.Helper()
	names := slices.Sorted(maps.Keys(got))
	if *update {
		var sb strings.Builder
		fmt.Fprintf(&sb, "# sha256 of the float64 bits of %s; rewrite with: go test ./kernels -run %s -update\n", g.what, g.test)
		for _, n := range names {
			fmt.Fprintf(&sb, "%s %s\n", n, got[n])
		}
		if err := os.MkdirAll(filepath.Dir(g.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(g.path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d hashes to %s", len(names), g.path)
		return
	}
	want, err := readGolden(g.path)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	var bad []string
	for _, n := range names {
		w, ok := want[n]
		switch {
		case !ok:
			bad = append(bad, n+": not in the golden file")
		case w == got[n]:
		default:
			if g.known != nil {
				if why, ok := g.known(n); ok {
					t.Logf("%s: bits differ (%s)", n, why)
					continue
				}
			}
			bad = append(bad, n+": bits differ")
		}
	}
	for n := range want {
		if _, ok := got[n]; !ok {
			bad = append(bad, n+": in the golden file but no longer computed")
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%d of %d hashes differ from %s (a deliberate change of arithmetic: rerun with -update):\n\t%s",
			len(bad), len(names), g.path, strings.Join(bad, "\n\t"))
	}
}

// readGolden reads a golden file: "name hash" lines, blank lines and # comments.
func readGolden(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		name, hash, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"name hash\", got %q", path, line, s)
		}
		want[name] = strings.TrimSpace(hash)
	}
	return want, sc.Err()
}
