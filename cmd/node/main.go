// Command node is the didnmf command line under the name the design notes give it: the same
// program as cmd/didnmf (both are package internal/cli's Main), which users install, since
// "node" is Node.js's command on many machines.
package main

import (
	"os"

	"github.com/didnmf/didnmf/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
