package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

// TestNames: how a build is named in one word (Short), with its Go version (ID), and its
// commit as printed.
func TestNames(t *testing.T) {
	for _, c := range []struct {
		v                 Version
		short, id, commit string
	}{
		{Version{Version: "v0.4.0", Commit: "0123456789abcdef", Go: "go1.23.4"}, "v0.4.0", "v0.4.0 go1.23.4", "0123456789abcdef"},
		{Version{Version: "(devel)", Go: "go1.23.4"}, "(devel)", "(devel) go1.23.4", "unknown"},
		{Version{Version: "(devel)", Commit: "0123456789abcdef0123", Go: "go1.24.0"}, "(devel)@0123456789ab", "(devel)@0123456789ab go1.24.0", "0123456789abcdef0123"},
		{Version{Version: "(devel)", Commit: "0123456789abcdef0123", Modified: true, Go: "go1.24.0"}, "(devel)@0123456789ab+modified",
			"(devel)@0123456789ab+modified go1.24.0", "0123456789abcdef0123+modified"},
		{Version{Version: "(devel)", Go: "go1.24.0", Exe: "3f2a9c0d1b4e"}, "(devel)", "(devel) exe 3f2a9c0d1b4e go1.24.0", "unknown"},
	} {
		if got := c.v.Short(); got != c.short {
			t.Errorf("%+v: Short %q, want %q", c.v, got, c.short)
		}
		if got := c.v.ID(); got != c.id {
			t.Errorf("%+v: ID %q, want %q", c.v, got, c.id)
		}
		if got := c.v.CommitText(); got != c.commit {
			t.Errorf("%+v: CommitText %q, want %q", c.v, got, c.commit)
		}
	}
	if v := Read(); v.Go != runtime.Version() || !strings.HasSuffix(v.ID(), " "+runtime.Version()) {
		t.Errorf("Read: %+v, ID %q; want Go %s", v, v.ID(), runtime.Version())
	}
	// A test binary records no commit: its ID carries the executable's hash.
	if v := Read(); v.Commit == "" && (len(exeHash()) != 12 || ID() != v.Short()+" exe "+exeHash()+" "+v.Go) {
		t.Errorf("Read without a commit: %+v, ID %q; want the executable's hash", v, ID())
	}
}
