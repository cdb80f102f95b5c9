package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// fashionDir is where Debian's dataset-fashion-mnist package puts the images.
const fashionDir = "/usr/share/datasets/fashion-mnist"

// cmdDemo factorizes a default input with progress and a summary: Fashion-MNIST's 70,000
// images (K=10, k-means init as in the DID paper) when the Debian package is installed, a
// synthetic 1,000,000 x 5 matrix of rank 3 otherwise, on three actor systems that talk over
// gRPC on loopback. Any factorize flag overrides the defaults (--nodes 0: no actors).
func cmdDemo(args []string, stdout, stderr io.Writer) error {
	given := map[string]bool{}
	for _, a := range args {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		given[name] = true
	}
	var defaults []string
	fashion := fashionDir + "/train-images-idx3-ubyte.gz"
	if _, err := os.Stat(fashion); err == nil && !given["input"] {
		defaults = append(defaults, "--input", fashion, "--input", fashionDir+"/t10k-images-idx3-ubyte.gz",
			"--rank", "10", "--init", "kmeans", "--max-iter", "100", "--shards", "4")
		fmt.Fprintf(stderr, "demo: Fashion-MNIST from %s, 70000 images of 28x28, rank 10, DID on 4 shards over 3 actor systems on loopback (gRPC)\n", fashionDir)
	} else if !given["input"] {
		defaults = append(defaults, "--input", "synthetic:m=5,n=1000000,k=3,seed=1", "--rank", "3", "--shards", "4")
		fmt.Fprintln(stderr, "demo: synthetic 1,000,000 samples x 5 features of rank 3 (install Debian's dataset-fashion-mnist for real images), DID on 4 shards over 3 actor systems on loopback (gRPC)")
	}
	if !given["nodes"] {
		defaults = append(defaults, "--nodes", "3")
	}
	if !given["out"] {
		dir, err := os.MkdirTemp("", "didnmf-demo-")
		if err != nil {
			return err
		}
		defaults = append(defaults, "--out", dir)
	}
	return cmdFactorize(append(defaults, args...), stdout, stderr)
}
