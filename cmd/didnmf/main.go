// Command didnmf is didnmf's command line: factorize a nonnegative matrix in this process or on
// a cluster, run a cluster member, watch and cancel jobs, choose a rank, draw results.
//
//	go install github.com/didnmf/didnmf/cmd/didnmf@latest
//	didnmf help
//
// See package internal/cli for the commands; cmd/node is the same program under the name the
// design notes give it.
package main

import (
	"os"

	"github.com/didnmf/didnmf/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
