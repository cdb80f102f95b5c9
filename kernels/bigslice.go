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
//
// The advice is taken back when the slice dies (adviseHuge): left on the heap's memory, the
// kernel's collapser could rebuild huge pages over ranges the Go runtime has returned and
// reused for small objects, the memory growth that made Go itself stop advising (Go 1.21.4,
// golang/go#64332), and a node process that runs job after job would collect it.
func makeFloats(n int) []float64 {
	s := make([]float64, n)
	if 8*n >= hugeMin {
		adviseHuge(s)
	}
	return s
}
