// Package buildinfo reads what a didnmf binary knows of its own build: the module version,
// the commit it was built from and whether its tree was modified, and the Go version. Nodes
// advertise it, `didnmf --version` prints it, and a sweep's journal records it, so that runs
// made by different builds (whose kernels may give other bits) are told apart.
package buildinfo

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// Version is a binary's build: Version is the main module's version ("(devel)" when built from
// a source tree), Commit the VCS revision ("" when the build recorded none), Modified whether
// the tree had uncommitted changes, Go the Go version. Exe, which the package's ID fills in
// when the build recorded no commit (built with -buildvcs=false, or outside a repository), is
// the first 12 hexadecimal digits of the SHA-256 of the executable's bytes, so that two such
// builds of other sources differ.
type Version struct {
	Version, Commit, Go string
	Modified            bool
	Exe                 string
}

// Read returns this binary's build.
func Read() Version {
	v := Version{Version: "(devel)", Go: runtime.Version()}
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

// ID is this binary's Version.ID, with Exe, the executable's hash, filled in when the build
// recorded no commit. Only the ID hashes the executable: Read (the version line, a node's
// advertised version) does not.
func ID() string {
	v := Read()
	if v.Commit == "" {
		v.Exe = exeHash()
	}
	return v.ID()
}

// exeHash is the first 12 hexadecimal digits of the SHA-256 of this process's executable
// ("" when it cannot be read), computed once (a 45 MB binary: about 30 ms).
var exeHash = sync.OnceValue(func() string {
	path, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
})

// CommitText is the commit as printed: the revision, with "+modified" when the tree was,
// "unknown" when the build recorded none.
func (v Version) CommitText() string {
	if v.Commit == "" {
		return "unknown"
	}
	if v.Modified {
		return v.Commit + "+modified"
	}
	return v.Commit
}

// Short names the build in one word: the module version, or for a build from a source tree
// ("(devel)") with the commit's first 12 digits and "+modified", so that builds from
// different commits differ.
func (v Version) Short() string {
	s := v.Version
	if s == "(devel)" && v.Commit != "" {
		s += "@" + v.Commit[:min(len(v.Commit), 12)]
		if v.Modified {
			s += "+modified"
		}
	}
	return s
}

// ID is Short with the executable's hash when it has one, and the Go version
// ("(devel)@0123456789ab go1.23.4", "(devel) exe 3f2a9c0d1b4e go1.23.4"): what decides a
// binary's bits, since the kernels use Go's math package.
func (v Version) ID() string {
	if v.Exe != "" {
		return v.Short() + " exe " + v.Exe + " " + v.Go
	}
	return v.Short() + " " + v.Go
}
