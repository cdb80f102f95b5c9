package kernels

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bits.golden from this build's results")

const bitsGolden = "testdata/bits.golden"

// hashFloats returns the sha256 of the little-endian IEEE bits of v, in hex.
func hashFloats(v []float64) string {
	h := sha256.New()
	var buf [8]byte
	for _, x := range v {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(x))
		h.Write(buf[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// bitsCases returns every result hash the golden file pins, by name: B and C of 30 iterations
// of every algorithm on a small dense and a small sparse (CSC) problem, DID in both forms,
// each initialisation, and the normal draws that random init and the SVD sketch use.
func bitsCases(t *testing.T) map[string]string {
	dense := synthDense(20, 300, 4, 31, 0.05)
	sparse := ToCSC(sparsify(synthDense(20, 300, 4, 37, 0.05), 0.6, 5))
	stop := StopRule{Tol: 0, MaxIter: 30}
	got := map[string]string{}
	put := func(name string, res *Result) {
		got[name+"/B"] = hashFloats(res.B)
		got[name+"/C"] = hashFloats(res.C)
	}
	for _, data := range []struct {
		name string
		x    Block
	}{{"dense", dense}, {"sparse", sparse}} {
		for _, a := range Algorithms() {
			p := 1
			if a.Distributed {
				p = 3
			}
			forms := []Form{FormAuto}
			if a.Name == DID {
				forms = []Form{FormGram, FormResidual}
			}
			for _, form := range forms {
				cfg := bitsConfig(a.Name, stop)
				cfg.Options.Form = form
				name := fmt.Sprintf("%s/%s/p%d", data.name, a.Name, p)
				if a.Name == DID {
					name += "/" + form.String()
				}
				put(name, mustRun(t, data.x, p, cfg))
			}
		}
		for _, init := range []InitMethod{InitNNDSVD, InitNNDSVDA, InitKMeans} {
			cfg := bitsConfig(DBCD, StopRule{Tol: 0, MaxIter: 1})
			cfg.Init.Method = init
			put(fmt.Sprintf("%s/init-%s/dbcd/p3/1iter", data.name, init), mustRun(t, data.x, 3, cfg))
		}
	}
	r := NewRNG(7, DomainInitB, 0)
	norms := make([]float64, 1<<16)
	for i := range norms {
		norms[i] = r.Norm()
	}
	got["rng/norm/65536"] = hashFloats(norms)
	return got
}

// bitsConfig is the job of every golden case (spelled out here, not shared with other tests,
// so that the golden hashes change only with the arithmetic).
func bitsConfig(algo Algorithm, stop StopRule) Config {
	return Config{Algo: algo, K: 4, Seed: 7, Init: InitSpec{Method: InitRandom}, Stop: stop, Threads: 2}
}

// TestBitsDoNotDependOnBuildFlags pins the bits of every algorithm's factors: the project
// promises bitwise-identical factors across builds (GOAMD64=v1 and v3 alike, see "Pinned
// arithmetic" in doc.go), so any change here is either a deliberate change of arithmetic, to
// be recorded with -update, or a bug. CI runs it under the default build and under
// GOAMD64=v3.
func TestBitsDoNotDependOnBuildFlags(t *testing.T) {
	got := bitsCases(t)
	names := slices.Sorted(maps.Keys(got))
	if *update {
		var sb strings.Builder
		sb.WriteString("# sha256 of the float64 bits of B and C; rewrite with: go test ./kernels -run TestBitsDoNotDependOnBuildFlags -update\n")
		for _, n := range names {
			fmt.Fprintf(&sb, "%s %s\n", n, got[n])
		}
		if err := os.MkdirAll(filepath.Dir(bitsGolden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bitsGolden, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %d hashes to %s", len(names), bitsGolden)
		return
	}
	want, err := readGolden(bitsGolden)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	fusing := fusingBuild()
	var bad []string
	for _, n := range names {
		switch w, ok := want[n]; {
		case !ok:
			bad = append(bad, n+": not in the golden file")
		case w != got[n] && fusing && strings.Contains(n, "/init-nndsvd"):
			// Known: NNDSVD's eigendecomposition is gonum's (mat.EigenSym), whose LAPACK code
			// the compiler fuses under GOAMD64=v3, outside this module's pinned arithmetic.
			t.Logf("%s: bits differ in this FMA-fusing build (known: gonum's EigenSym is not pinned)", n)
		case w != got[n]:
			bad = append(bad, n+": bits differ")
		}
	}
	for n := range want {
		if _, ok := got[n]; !ok {
			bad = append(bad, n+": in the golden file but no longer computed")
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		t.Errorf("%d of %d hashes differ from %s (a deliberate change of arithmetic: rerun with -update):\n\t%s",
			len(bad), len(names), bitsGolden, strings.Join(bad, "\n\t"))
	}
}

func readGolden(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		name, hash, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"name hash\", got %q", path, line, s)
		}
		want[name] = strings.TrimSpace(hash)
	}
	return want, sc.Err()
}

// fusingBuild reports whether this test binary was built for a target whose compiler fuses
// x*y+z into an FMA: amd64 with GOAMD64=v3 or later, and the other architectures that have one.
func fusingBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOARCH"] != "amd64" {
		return settings["GOARCH"] != "386" // 386 and amd64 v1/v2 have no FMA to fuse into
	}
	level := strings.TrimPrefix(settings["GOAMD64"], "v")
	return level >= "3"
}
