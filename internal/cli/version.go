package cli

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/kernels"
)

// buildVersion is what the binary knows of its build: the main module's version ("(devel)"
// when built from a source tree), the VCS commit and whether the tree was modified (empty
// when the build recorded none), and the Go version.
type buildVersion struct {
	Version, Commit, Go string
	Modified            bool
}

func readBuildVersion() buildVersion {
	v := buildVersion{Version: "(devel)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// commit is the commit as printed: the revision, "+modified" when the tree was, "unknown"
// when the build recorded none.
func (v buildVersion) commit() string {
	if v.Commit == "" {
		return "unknown"
	}
	if v.Modified {
		return v.Commit + "+modified"
	}
	return v.Commit
}

// advertised is the version a node advertises in its gossip meta (cluster.Meta.Version), which
// status and the dashboard compare across members: the module version; for a build from a
// source tree ("(devel)"), with the commit's first 12 digits (and "+modified"), so that nodes
// built from different commits differ. At most cluster.MaxVersionBytes, printable, no spaces.
func (v buildVersion) advertised() string {
	s := v.Version
	if s == "(devel)" && v.Commit != "" {
		s += "@" + v.Commit[:min(len(v.Commit), 12)]
		if v.Modified {
			s += "+modified"
		}
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, s)
	for len(s) > cluster.MaxVersionBytes { // by whole runes, so that the cut stays UTF-8
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// versionLine is the line `didnmf --version` and `didnmf CMD --version` print: version, commit,
// Go version and the kernel path this process runs.
func versionLine() string {
	v := readBuildVersion()
	return fmt.Sprintf("didnmf %s, commit %s, %s, kernels %s", v.Version, v.commit(), v.Go, kernels.ActiveKernelPath())
}

// versionAttrs are the version line's fields, as serve logs them at start.
func versionAttrs() []any {
	v := readBuildVersion()
	return []any{slog.String("version", v.Version), slog.String("commit", v.commit()), slog.String("go", v.Go),
		slog.String("kernels", kernels.ActiveKernelPath().String())}
}

// wantsVersion reports whether a command's arguments ask for the version line: they are
// --version (or -version) alone. Anywhere else it may be a flag's value (factorize --out
// --version names a directory), and with -h the command prints its help.
func wantsVersion(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version")
}

// printVersion writes the version line.
func printVersion(w io.Writer) { fmt.Fprintln(w, versionLine()) }
