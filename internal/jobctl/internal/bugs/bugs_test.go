package bugs

import "testing"

// TestEveryBugIsNamed: the bite test's table reads the names; a bug without one would be
// reported as blank.
func TestEveryBugIsNamed(t *testing.T) {
	for _, b := range All() {
		if names[b] == "" {
			t.Errorf("bug %#x has no name", uint64(b))
		}
	}
	if got := (WholeScatter | EarlyCommit).String(); got != names[WholeScatter]+", "+names[EarlyCommit] {
		t.Errorf("String: %q", got)
	}
	if Set(0).String() != "none" {
		t.Errorf("the empty set: %q", Set(0).String())
	}
}
