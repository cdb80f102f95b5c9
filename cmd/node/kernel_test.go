package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/kernels"
)

// TestMixedKernelPathsCluster: a cluster whose nodes run different kernel paths (generic Go on
// one, the CPU's best assembly on the others) gives bitwise the factors of a local run, for
// DID (the Gram lane) and MU (the products), on dense and sparse data.
func TestMixedKernelPathsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	paths := kernels.AvailableKernelPaths()
	if len(paths) < 2 {
		t.Skip("this CPU and build have only the generic kernels")
	}
	isolateGossip(t)
	best := paths[len(paths)-1].String()
	a := startServe(t, "a", "--kernel", "generic")
	b := startServe(t, "b", "--kernel", best, "--join", a.gossip)
	c := startServe(t, "c", "--kernel", paths[1].String(), "--join", a.gossip)
	waitFor(t, "3 members seen by a", 20*time.Second, func() bool { return len(clusterStatus(t, a.gossip)) == 3 })
	for p, want := range map[*serveProc]string{a: "generic", b: best, c: paths[1].String()} {
		if !strings.Contains(p.started, "kernels "+want+",") {
			t.Fatalf("node %s: %q, want kernels %s", p.name, p.started, want)
		}
	}

	dir := t.TempDir()
	dense := filepath.Join(dir, "x.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=20,n=3000,k=5,seed=3", "--out", dense); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	for _, algo := range []string{"did", "mu"} {
		for _, layout := range []string{"dense", "sparse"} {
			shards := "6"
			if algo == "mu" {
				shards = "1"
			}
			job := []string{"--input", dense, "--rank", "5", "--algo", algo, "--layout", layout, "--shards", shards, "--max-iter", "15", "--tol", "0", "--quiet"}
			golden := filepath.Join(dir, algo+"-"+layout+"-golden")
			if code, _, stderr := runNode(t, append([]string{"factorize", "--kernel", "generic", "--out", golden}, job...)...); code != 0 {
				t.Fatal(stderr)
			}
			out := filepath.Join(dir, algo+"-"+layout)
			if code, text := runProc(t, append([]string{"factorize", "--cluster", a.gossip, "--out", out}, job...)...); code != 0 {
				t.Fatalf("%s %s: exit %d: %s", algo, layout, code, text)
			}
			sameFiles(t, filepath.Join(golden, "basis.npy"), filepath.Join(out, "basis.npy"))
			sameFiles(t, filepath.Join(golden, "coef.npy"), filepath.Join(out, "coef.npy"))
		}
	}
}
