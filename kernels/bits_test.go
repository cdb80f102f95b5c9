package kernels

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

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
	fusing := fusingBuild()
	golden{path: bitsGolden, what: "B and C", test: "TestBitsDoNotDependOnBuildFlags",
		known: func(name string) (string, bool) {
			// Known: NNDSVD's eigendecomposition is gonum's (mat.EigenSym), whose LAPACK code
			// the compiler fuses under GOAMD64=v3, outside this module's pinned arithmetic.
			return "known in this FMA-fusing build: gonum's EigenSym is not pinned", fusing && strings.Contains(name, "/init-nndsvd")
		}}.check(t, bitsCases(t))
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
