package kernels

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// KernelPath names a family of kernel implementations: the generic Go code, or assembly for a
// CPU feature level. Every path computes the same bits (the arithmetic is pinned; see doc.go),
// so the choice only changes speed.
type KernelPath uint8

const (
	// KernelAuto picks the fastest path this CPU and build offer.
	KernelAuto KernelPath = iota
	// KernelGeneric is the pure-Go code, the definition the other paths match.
	KernelGeneric
	// KernelAVX2 is assembly for AVX2 with FMA (x86-64-v3).
	KernelAVX2
	// KernelAVX512 is assembly for AVX-512 (F and VL).
	KernelAVX512
)

// KernelEnv is the environment variable that chooses the kernel path of a process when no
// --kernel flag does.
const KernelEnv = "DIDNMF_KERNEL"

var kernelPathNames = [...]string{KernelAuto: "auto", KernelGeneric: "generic", KernelAVX2: "avx2", KernelAVX512: "avx512"}

func (p KernelPath) String() string {
	if int(p) < len(kernelPathNames) {
		return kernelPathNames[p]
	}
	return fmt.Sprintf("KernelPath(%d)", uint8(p))
}

// ParseKernelPath reads a path name: auto, generic, avx2 or avx512.
func ParseKernelPath(s string) (KernelPath, error) {
	for p, name := range kernelPathNames {
		if strings.EqualFold(s, name) {
			return KernelPath(p), nil
		}
	}
	return 0, fmt.Errorf("unknown kernel %q (known: auto, generic, avx2, avx512)", s)
}

// AvailableKernelPaths lists the paths this CPU and build can run, generic first and the
// fastest last.
func AvailableKernelPaths() []KernelPath {
	paths := []KernelPath{KernelGeneric}
	for _, p := range []KernelPath{KernelAVX2, KernelAVX512} {
		if gramKernelsFor(p) != nil {
			paths = append(paths, p)
		}
	}
	return paths
}

// CheckKernelPath returns an error naming what this CPU and build offer when p cannot run
// here. KernelAuto always can.
func CheckKernelPath(p KernelPath) error {
	if p == KernelAuto || p == KernelGeneric {
		return nil
	}
	if p > KernelAVX512 {
		return fmt.Errorf("unknown kernel %v", p)
	}
	if gramKernelsFor(p) == nil {
		names := []string{}
		for _, a := range AvailableKernelPaths() {
			names = append(names, a.String())
		}
		return fmt.Errorf("kernel %s is not available here (%s; kernels this CPU and build can run: auto, %s)",
			p, cpuDescription(), strings.Join(names, ", "))
	}
	return nil
}

// activePath is the process's kernel path (never KernelAuto once resolved).
var activePath atomic.Uint32

// SetKernelPath chooses the kernel path of every kernel created afterwards in this process.
// KernelAuto picks the fastest available. It returns an error, and changes nothing, when the
// path cannot run here. Since every path computes the same bits, changing it mid-run only
// changes speed.
func SetKernelPath(p KernelPath) error {
	if err := CheckKernelPath(p); err != nil {
		return err
	}
	if p == KernelAuto {
		p = bestKernelPath()
	}
	activePath.Store(uint32(p))
	return nil
}

// bestKernelPath is the fastest path this CPU and build offer: the last available one.
func bestKernelPath() KernelPath {
	all := AvailableKernelPaths()
	return all[len(all)-1]
}

// ActiveKernelPath returns the path kernels created now use.
func ActiveKernelPath() KernelPath {
	if p := KernelPath(activePath.Load()); p != KernelAuto {
		return p
	}
	return bestKernelPath()
}

// KernelPathFromEnv reads $DIDNMF_KERNEL (KernelAuto when unset or empty).
func KernelPathFromEnv() (KernelPath, error) {
	s := os.Getenv(KernelEnv)
	if s == "" {
		return KernelAuto, nil
	}
	p, err := ParseKernelPath(s)
	if err != nil {
		return 0, fmt.Errorf("$%s: %w", KernelEnv, err)
	}
	return p, nil
}

// activeGramKernels returns the Gram lane kernels of the active path.
func activeGramKernels() *gramKernels {
	if k := gramKernelsFor(ActiveKernelPath()); k != nil {
		return k
	}
	return &genericGram
}

// gramKernelsOf returns the Gram lane kernels of path p (Options.Kernel): the active path's
// for KernelAuto, the generic ones for a path that cannot run here (ShardSpec validation
// refuses those first).
func gramKernelsOf(p KernelPath) *gramKernels {
	if p == KernelAuto {
		return activeGramKernels()
	}
	if k := gramKernelsFor(p); k != nil {
		return k
	}
	return &genericGram
}
