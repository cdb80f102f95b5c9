package kernels

// hugeMin is the size from which makeFloats asks for transparent huge pages: below it the
// page faults are few and a 2 MB page could cost more memory than it saves time.
const hugeMin = 8 << 20

// makeFloats returns a zeroed slice of n float64s, as make does. A large one is backed by
// transparent huge pages where the system offers them on request (Linux with THP in
// "madvise" mode, the common default): its first touch then faults once per 2 MB instead of
// once per 4 KB. On this project's 2-core VM a fault costs about 17 µs, so writing a fresh
// 240 MB C took 0.85-1.0 s with 4 KB pages and 0.3-0.55 s with huge pages: the random
// initialisation, the extrapolation's copy of C and the generation of X paid that before the
// first iteration ended. The values and the results are the same either way.
func makeFloats(n int) []float64 {
	s := make([]float64, n)
	if 8*n >= hugeMin {
		adviseHuge(s)
	}
	return s
}

// MakeFloats is makeFloats for the packages that fill large blocks (matio's readers).
func MakeFloats(n int) []float64 { return makeFloats(n) }
