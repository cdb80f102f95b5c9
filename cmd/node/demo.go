package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/pki"
	"github.com/didnmf/didnmf/server"
)

// demoRoots are the directories the demo's nodes may read inputs from: Fashion-MNIST's, and
// those of the inputs given on the command line.
func demoRoots(args []string) []string {
	var roots []string
	if _, err := os.Stat(fashionDir); err == nil {
		roots = append(roots, fashionDir)
	}
	for i, a := range args {
		var in string
		switch {
		case (a == "--input" || a == "-input") && i+1 < len(args):
			in = args[i+1]
		case strings.HasPrefix(a, "--input=") || strings.HasPrefix(a, "-input="):
			in = a[strings.Index(a, "=")+1:]
		}
		if in != "" && !strings.HasPrefix(in, "synthetic:") {
			if abs, err := filepath.Abs(in); err == nil && !slices.Contains(roots, filepath.Dir(abs)) {
				roots = append(roots, filepath.Dir(abs))
			}
		}
	}
	return roots
}

// demoMaxJobTime caps any job on the demo cluster (serve --max-job-time).
const demoMaxJobTime = 30 * time.Minute

// fashionDir is where Debian's dataset-fashion-mnist package puts the images.
const fashionDir = "/usr/share/datasets/fashion-mnist"

// cmdDemo factorizes a default input with progress and a summary: Fashion-MNIST's 70,000
// images (K=10, k-means init as in the DID paper) when the Debian package is installed, a
// synthetic 1,000,000 x 5 matrix of rank 3 otherwise, on a cluster of three nodes started in
// this process that find each other by gossip and talk over gRPC on loopback; the job is
// submitted by a client that joins the gossip as factorize --cluster does. Any factorize flag
// overrides the defaults (--nodes N: N actor systems without gossip; --nodes 0: no actors).
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
		fmt.Fprintf(stderr, "demo: Fashion-MNIST from %s, 70000 images of 28x28, rank 10, DID on 4 shards on a 3-node cluster on loopback (gossip + gRPC)\n", fashionDir)
	} else if !given["input"] {
		defaults = append(defaults, "--input", "synthetic:m=5,n=1000000,k=3,seed=1", "--rank", "3", "--shards", "4")
		fmt.Fprintln(stderr, "demo: synthetic 1,000,000 samples x 5 features of rank 3 (install Debian's dataset-fashion-mnist for real images), DID on 4 shards on a 3-node cluster on loopback (gossip + gRPC)")
	}
	if !given["nodes"] && !given["cluster"] {
		addr, secretFile, stop, err := startDemoCluster(3, demoRoots(args), stderr)
		if err != nil {
			return err
		}
		defer stop()
		defaults = append(defaults, "--cluster", addr, "--secret-file", secretFile)
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

// startDemoCluster starts n member nodes in this process on loopback, joined by gossip and
// sharing one kernels pool, with a cluster secret of their own, and returns the first one's
// gossip address and the file the secret is in (for the client).
func startDemoCluster(n int, roots []string, stderr io.Writer) (string, string, func(), error) {
	pool := kernels.NewPool(0)
	var nodes []*server.Server
	stop := func() {
		for _, s := range nodes {
			_ = s.Leave(time.Second)
		}
		pool.Close()
	}
	dir, err := os.MkdirTemp("", "didnmf-demo-nodes-")
	if err != nil {
		return "", "", nil, err
	}
	secret, secretFile := pki.NewSecret(), filepath.Join(dir, "cluster.secret")
	if err := pki.WriteSecret(secretFile, secret); err != nil {
		os.RemoveAll(dir)
		return "", "", nil, err
	}
	for i := 0; i < n; i++ {
		cfg := server.Config{Name: fmt.Sprintf("demo-%d", i+1), Bind: "127.0.0.1:0", Pool: pool, DataDir: filepath.Join(dir, fmt.Sprint(i+1)),
			Secret: secret, MaxJobTime: demoMaxJobTime, DataRoots: roots}
		if i > 0 {
			cfg.Join = []string{nodes[0].Gossip()}
		}
		s, err := server.Start(cfg)
		if err != nil {
			stop()
			os.RemoveAll(dir)
			return "", "", nil, err
		}
		nodes = append(nodes, s)
	}
	for deadline := time.Now().Add(10 * time.Second); len(nodes[0].Members.Workers()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			os.RemoveAll(dir)
			return "", "", nil, fmt.Errorf("demo: the %d nodes did not all see each other within 10 s", n)
		}
	}
	names := make([]string, n)
	for i, s := range nodes {
		names[i] = fmt.Sprintf("%s (gossip %s, actor %s)", s.Name(), s.Gossip(), s.Node.Address())
	}
	fmt.Fprintf(stderr, "demo: cluster up: %s\n", strings.Join(names, ", "))
	return nodes[0].Gossip(), secretFile, func() {
		stop()
		os.RemoveAll(dir)
	}, nil
}
