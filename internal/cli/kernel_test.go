package cli

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/kernels"
)

// TestMixedKernelPathsCluster: a cluster whose nodes run different kernel paths (generic Go on
// one, the CPU's best assembly on the others) gives bitwise the factors of a local run with the
// generic kernels and float64 storage, for DID (the Gram lane) and MU (the products), on dense
// and sparse data, with the nodes storing X as float32 (counts) or as auto picks.
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
	b := startServe(t, "b", "--kernel", best, "--join", a.Gossip)
	c := startServe(t, "c", "--kernel", paths[1].String(), "--join", a.Gossip)
	waitFor(t, "3 members seen by a", 20*time.Second, func() bool { return len(clusterStatus(t, a.Gossip)) == 3 })
	for p, want := range map[*serveProc]string{a: "generic", b: best, c: paths[1].String()} {
		if got := p.serving.Attr("kernels"); got != want {
			t.Fatalf("node %s serves with kernels %q, want %s (%s)", p.name, got, want, p.serving.Line)
		}
	}

	dir := t.TempDir()
	synth := filepath.Join(dir, "x.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=20,n=3000,k=5,seed=3", "--out", synth); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	// Counts (exact in float32), for float32 storage on the nodes.
	counts := filepath.Join(dir, "counts.npy")
	cv := make([]float64, 3000*20)
	for i := range cv {
		cv[i] = float64((i*7919)%13) * float64((i/20)%5)
	}
	writeNPY(t, counts, 3000, 20, cv)
	for _, algo := range []string{"did", "mu"} {
		for _, layout := range []string{"dense", "sparse"} {
			for _, in := range []struct{ path, storage string }{{synth, "auto"}, {counts, "float32"}} {
				shards := "6"
				if algo == "mu" {
					shards = "1"
				}
				job := []string{"--input", in.path, "--rank", "5", "--algo", algo, "--layout", layout, "--shards", shards, "--max-iter", "15", "--tol", "0", "--quiet"}
				clusterMatchesLocal(t, filepath.Join(dir, algo+"-"+layout+"-"+in.storage), a.Gossip, job,
					[]string{"--storage", "float64"}, []string{"--storage", in.storage})
			}
		}
	}
	// With --layout auto, the AVX-512 node reads a DID block of density 0.56 dense and the
	// others CSC. Without AVX-512 every node reads it as CSC, and the check proves nothing new.
	if best == kernels.KernelAVX512.String() {
		layoutAutoSameBits(t, dir, a.Gossip)
	} else {
		t.Logf("no AVX-512 here: the --layout auto check is skipped")
	}

	// float32 storage of data that float32 cannot hold is refused by the shards, naming a value.
	code, text := runProc(t, "factorize", "--cluster", a.Gossip, "--storage", "float32", "--input", synth, "--rank", "5",
		"--shards", "3", "--max-iter", "5", "--out", filepath.Join(dir, "inexact"), "--quiet")
	if code == 0 || !strings.Contains(text, "not exactly a float32") || !strings.Contains(text, "sample ") {
		t.Errorf("float32 storage of inexact data on the cluster: exit %d: %s", code, text)
	}
}

// layoutAutoSameBits: with --layout auto, DID (layout-invariant) reads each block in its node's
// faster layout. A job of density 0.56 on the cluster gives the generic local run's bits.
func layoutAutoSameBits(t *testing.T, dir, cluster string) {
	t.Helper()
	// With --layout auto, DID (layout-invariant) reads each block in its node's faster layout:
	// at a density of 0.56, CSC on the generic and AVX2 paths and dense on AVX-512. The bits
	// are the same, with several lanes a shard (1,000 columns: 4 lanes), whose partial sums
	// once grouped by stored entries on CSC and by columns on dense (it failed then). The
	// first 300 samples of each shard's 1,000 store every entry and the others about 3 in 8
	// (density 0.56), so that on every shard, whichever lands on the AVX-512 node, a cut at
	// equal stored entries differs from one at equal columns.
	mid := filepath.Join(dir, "mid.npy")
	mv := make([]float64, 3000*20)
	for i := range mv {
		if h := uint32(i) * 2654435761; h>>29 >= 5 || (i/20)%1000 < 300 {
			mv[i] = float64(1 + h%7)
		}
	}
	writeNPY(t, mid, 3000, 20, mv)
	job := []string{"--input", mid, "--rank", "5", "--shards", "3", "--max-iter", "15", "--tol", "0", "--quiet"}
	clusterMatchesLocal(t, filepath.Join(dir, "layout-auto"), cluster, job, nil, nil)
}

// clusterMatchesLocal runs the factorize job in this process on the generic kernels (with the
// flags local) into out-golden, and on the cluster (with the flags remote) into out, and
// fails unless the two write the same basis.npy and coef.npy.
func clusterMatchesLocal(t *testing.T, out, cluster string, job, local, remote []string) {
	t.Helper()
	golden := out + "-golden"
	if code, _, stderr := runNode(t, slices.Concat([]string{"factorize", "--kernel", "generic", "--out", golden}, local, job)...); code != 0 {
		t.Fatal(stderr)
	}
	if code, text := runProc(t, slices.Concat([]string{"factorize", "--cluster", cluster, "--out", out}, remote, job)...); code != 0 {
		t.Fatalf("%s: exit %d: %s", filepath.Base(out), code, text)
	}
	sameFiles(t, filepath.Join(golden, "basis.npy"), filepath.Join(out, "basis.npy"))
	sameFiles(t, filepath.Join(golden, "coef.npy"), filepath.Join(out, "coef.npy"))
}
