package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/buildinfo"
	"github.com/didnmf/didnmf/kernels"
)

// buildVersion is what the binary knows of its build.
type buildVersion = buildinfo.Version

// readBuildVersion reads this binary's build.
func readBuildVersion() buildVersion { return buildinfo.Read() }

// advertised is the version a node advertises in its gossip meta (cluster.Meta.Version), which
// status and the dashboard compare across members: the module version; for a build from a
// source tree ("(devel)"), with the commit's first 12 digits (and "+modified"), so that nodes
// built from different commits differ. At most cluster.MaxVersionBytes, printable, no spaces.
func advertised(v buildVersion) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, v.Short())
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
	return fmt.Sprintf("didnmf %s, commit %s, %s, kernels %s", v.Version, v.CommitText(), v.Go, kernels.ActiveKernelPath())
}

// versionAttrs are the version line's fields, as serve logs them at start.
func versionAttrs() []any {
	v := readBuildVersion()
	return []any{slog.String("version", v.Version), slog.String("commit", v.CommitText()), slog.String("go", v.Go),
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
