// Package cli is the didnmf command line: cmd/didnmf (the command users install) and cmd/node
// (the name the design card gives it) are both [Main].
//
//	didnmf factorize --input PATH --rank K --out DIR [flags]   factorize a matrix (in this process, or --cluster IP:PORT)
//	didnmf serve --bind IP:PORT [--join IP:PORT,...]          run a cluster member until SIGINT/SIGTERM
//	didnmf status --cluster IP:PORT                           list a cluster's members, load and jobs
//	didnmf jobs --cluster IP:PORT                             list your jobs on a cluster, with progress
//	didnmf cancel --cluster IP:PORT JOB                       cancel one of your jobs
//	didnmf certs --name NAME --hosts IP,...                   make mutual-TLS certificates for a cluster
//	didnmf bench --input SPEC --rank K --algo A --iters N      time the kernels against their memory and compute floors
//	didnmf demo                                                factorize a default input on a 3-node cluster
//	didnmf plot --result DIR                                   draw a result: convergence, and the basis as images or top features
//	didnmf convert --input SPEC --out FILE                     write any input as .npy or raw float64
//	didnmf help CMD                                            a command's help (as didnmf CMD -h)
//	didnmf --version                                           the version, commit, Go version and kernel path (also didnmf CMD --version)
//
// Inputs hold samples as rows: an (N, M) .npy, scipy sparse .npz, MatrixMarket or IDX file, a
// 10x Cell Ranger directory, a block store directory (python3 -m didnmf convert), or a synthetic spec
// "synthetic:m=5,n=100000,k=3,seed=1[,noise=0.01]". Exit status: 0 success, 1 failure while
// running, 2 bad input or usage, 130 interrupted.
package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/didnmf/didnmf/usererr"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// Main runs the didnmf command line with args (without the program name), writing to stdout
// and stderr, and returns the exit status: 0 success, 1 failure while running, 2 bad input or
// usage, 130 interrupted. cmd/didnmf and cmd/node are both this function.
func Main(args []string, stdout, stderr io.Writer) int {
	return run(args, stdout, stderr)
}

const usageText = `usage: didnmf <command> [flags]

commands:
  factorize   factorize a nonnegative matrix (samples as rows) and write basis.npy, coef.npy, report.json;
              in this process, or on a running cluster with --cluster IP:PORT
  transform   project new samples onto a fixed basis: their coef by exact NNLS (as factorize --fix-basis)
  sweep       choose the rank: factorize at many ranks and seeds, report error, stability and a suggestion
  consensus   cNMF's consensus of a sweep's runs at one rank: outliers dropped, medians, usages refit by NNLS
  serve       run a cluster member: join by gossip (--join), take shards, leave on SIGINT/SIGTERM
  status      list a cluster's members, their load and running jobs
  jobs        list your jobs on a cluster, with their progress
  cancel      cancel one of your jobs on a cluster
  dashboard   print the login URLs of the members' dashboards and HTTP API (serve --http), for the secret's holder
  certs       make a cluster's certificate authority and node certificates for mutual TLS
  bench       time an algorithm per iteration against its memory and compute floors, print figures
  demo        start a 3-node cluster on loopback and factorize Fashion-MNIST (or a synthetic matrix) on it
  convert     write any input (or a synthetic spec) as a dense .npy or raw float64 file
  plot        draw a result directory as PNG and SVG: convergence, and the basis as images or top features
  help        show this text; "didnmf <command> -h" shows a command's flags

"didnmf --version" (or "didnmf <command> --version") prints the version, commit, Go version and kernel path.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	if args[0] == "--version" || args[0] == "-version" {
		printVersion(stdout)
		return exitOK
	}
	if slices.Contains(commandNames(), args[0]) && wantsVersion(args[1:]) {
		printVersion(stdout)
		return exitOK
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		return cmdHelp(args[1:], stdout, stderr)
	}
	cmd := command(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "didnmf: unknown command %q: the commands are %s (see didnmf help)\n", args[0], strings.Join(commandNames(), ", "))
		return exitUsage
	}
	return exitStatus(cmd(args[1:], stdout, stderr), stdout, stderr)
}

// command returns the function that runs the command named name, nil for an unknown name
// (help, which returns an exit status, is run's own).
func command(name string) func(args []string, stdout, stderr io.Writer) error {
	switch name {
	case "factorize":
		return cmdFactorize
	case "transform":
		return cmdTransform
	case "sweep":
		return cmdSweep
	case "consensus":
		return cmdConsensus
	case "bench":
		return cmdBench
	case "demo":
		return cmdDemo
	case "serve":
		return cmdServe
	case "status":
		return cmdStatus
	case "jobs":
		return cmdJobs
	case "cancel":
		return cmdCancel
	case "dashboard":
		return cmdDashboard
	case "certs":
		return cmdCerts
	case "convert":
		return cmdConvert
	case "plot":
		return cmdPlot
	}
	return nil
}

// CommandFlags returns the names (without dashes) of the flags the command cmd takes, sorted,
// as `didnmf CMD -h` lists them; deploy's tests check every flag the recipes pass to `didnmf
// serve` against it. It runs the command with -h only, which does nothing but parse its flags.
func CommandFlags(cmd string) ([]string, error) {
	run := command(cmd)
	if run == nil {
		return nil, fmt.Errorf("didnmf: unknown command %q", cmd)
	}
	var he helpError
	if err := run([]string{"-h"}, io.Discard, io.Discard); !errors.As(err, &he) {
		return nil, fmt.Errorf("didnmf %s -h: %v, want its help", cmd, err)
	}
	return he.flags, nil
}

// badInput returns an error of the user's input or flags (exit status 2): a *usererr.Error
// whose message is the formatted text (%w wraps its operand).
func badInput(format string, args ...any) error {
	return usererr.Errorf(format, args...)
}

// errInterrupted reports a run stopped by a signal after its results were written.
var errInterrupted = errors.New("interrupted")

// errHelp is returned when -h was asked (as a helpError, which holds the help).
var errHelp = errors.New("help")

func exitStatus(err error, stdout, stderr io.Writer) int {
	var he helpError
	var fe *flagError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &he):
		fmt.Fprint(stdout, he.text)
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.As(err, &fe):
		fmt.Fprintln(stderr, fe)
		return exitUsage
	case usererr.Is(err): // the one place the user's fault becomes exit status 2
		fmt.Fprintf(stderr, "didnmf: %s\n", flagText(err))
		return exitUsage
	default:
		fmt.Fprintf(stderr, "didnmf: %v\n", err)
		return exitFailure
	}
}
