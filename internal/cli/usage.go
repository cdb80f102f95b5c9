package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/didnmf/didnmf/internal/server"
)

// Help and usage errors. Every command parses its flags (parseFlagsArgs) before it does
// anything else: -h, -help or --help returns a helpError with the command's help, which run
// prints on stdout (exit 0); a flag error returns a flagError, one line on stderr (exit 2).

// helpError is returned when -h was asked: text is the command's help (its fs.Usage), flags
// the names of its flags, sorted (CommandFlags).
type helpError struct {
	text  string
	flags []string
}

func (e helpError) Error() string { return "help" }
func (e helpError) Unwrap() error { return errHelp }

// helpOf renders fs.Usage into a helpError.
func helpOf(fs *flag.FlagSet) error {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.Usage()
	fs.SetOutput(io.Discard)
	var flags []string
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) }) // in lexical order
	return helpError{text: b.String(), flags: flags}
}

// flagError is a usage error in a command's flags or arguments, printed as one line that
// names the command and points to its help:
//
//	didnmf factorize: flag provided but not defined: -rnak (see didnmf factorize -h)
type flagError struct {
	cmd string
	err error
}

func (e *flagError) Error() string {
	return fmt.Sprintf("didnmf %s: %v (see didnmf %s -h)", e.cmd, e.err, e.cmd)
}
func (e *flagError) Unwrap() error { return e.err }

// checkClusterFlag refuses a malformed --cluster (no port, a port out of range, no host)
// before anything is tried; whether something answers there is connect's business.
func checkClusterFlag(fs *flag.FlagSet) error {
	f := fs.Lookup("cluster")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	addrs := splitList(f.Value.String())
	if len(addrs) == 0 {
		return &flagError{cmd: fs.Name(), err: fmt.Errorf("--cluster %q: no address; want IP:PORT, a member's gossip address", f.Value.String())}
	}
	for _, a := range addrs {
		if err := server.CheckAddress(a); err != nil {
			return &flagError{cmd: fs.Name(), err: fmt.Errorf("--cluster %v", err)}
		}
	}
	return nil
}

// clusterErr turns server.Connect's error about the addresses into a usage error: a host that
// does not resolve, or addresses at which nothing answered for server.DefaultReach.
// Other errors (credentials refused, no member listed) are failures, as they were.
func clusterErr(addrs string, err error) error {
	var ae *server.AddressError
	var ue *server.UnreachableError
	switch {
	case errors.As(err, &ae):
		return badInput("--cluster %v", ae)
	case errors.As(err, &ue):
		return badInput("--cluster %s: %v: is a node serving there? (see didnmf serve -h)", addrs, ue)
	}
	return fmt.Errorf("--cluster %s: %w", addrs, err)
}

// commandLine matches a command in usageText's list: two spaces, the name, two spaces or more.
var commandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z0-9-]*)  +\S`)

// commandNames lists the commands of usageText, help excepted.
func commandNames() []string {
	var names []string
	for _, m := range commandLine.FindAllStringSubmatch(usageText, -1) {
		if m[1] != "help" {
			names = append(names, m[1])
		}
	}
	return names
}

// cmdHelp is "didnmf help [COMMAND]": the general help, or exactly what "didnmf COMMAND -h" prints.
func cmdHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0 || (len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help")):
		fmt.Fprint(stdout, usageText)
		return exitOK
	case len(args) > 1:
		fmt.Fprintf(stderr, "didnmf help: want one command, got %d arguments (see didnmf help)\n", len(args))
		return exitUsage
	}
	for _, name := range commandNames() {
		if name == args[0] {
			return run([]string{name, "-h"}, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "didnmf help: unknown command %q: the commands are %s (see didnmf help)\n", args[0], strings.Join(commandNames(), ", "))
	return exitUsage
}
