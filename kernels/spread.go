package kernels

import "sync/atomic"

// spreader keeps a pool's workers on different CPUs while they run pieces of work.
//
// Linux balances running threads between CPUs at its own pace, and some kernels (guests that
// pack their vCPUs, for one) may leave two busy threads of a process taking turns on one CPU
// while another CPU is idle. A pool's workers never sleep while pieces are queued, so nothing
// moves them. That is what made three nodes on two cores wait: at the end of each iteration
// the node with the most work ran its two workers on one vCPU, 10-15% of the machine idle.
//
// Before each piece a worker asks the kernel which CPU it is on (getcpu). If another worker of
// its pool started its current piece on that CPU, the worker moves itself to a CPU of its
// allowed set where no worker of the pool runs a piece, by setting its thread's affinity to
// that CPU alone and then back to the set it had. Nothing stays pinned, a worker never leaves
// its allowed set, and a pool with more workers than allowed CPUs does not spread. A worker only looks at its own pool: it may move next to another
// pool's or another process's threads, which the kernel then shares out as usual. Where the
// kernel spreads threads itself, no two workers meet and the cost is one getcpu a piece
// (about 0.2 µs). Results do not depend on it: it only moves threads.
//
// Two limits. The set restored is the effective one, which Linux (6.2 on) keeps as the
// thread's own request: a moved thread does not gain CPUs that a cpuset adds later, and an
// affinity change made by someone else between the read and the restore is undone for that
// thread. And a piece's recorded CPU may be stale (a worker moved by the kernel, or preempted
// while Go runs more workers than processors), which costs at most a needless move.
type spreader struct {
	placer   cpuPlacer
	where    []atomic.Int32 // per worker: the CPU of its current piece, -1 between pieces
	moves    atomic.Int64   // moves made (for tests)
	disabled atomic.Bool    // set when a thread could not be given its allowed set back
}

// cpuPlacer is what the spreader needs of the operating system; its methods act on the
// calling thread, so a worker calls them from its own goroutine while it runs a piece.
type cpuPlacer interface {
	// currentCPU returns the CPU the calling thread runs on, or -1.
	currentCPU() int
	// allowedCPUs returns how many CPUs the calling thread may run on (0 if unknown).
	allowedCPUs() int
	// moveTo moves the calling thread, worker w of s, to the first CPU of its allowed set
	// that s.busy(w, cpu) says is free, and restores the allowed set; it returns that CPU,
	// or -1 and moves nothing when there is none or the system refuses.
	moveTo(s *spreader, w int) int
}

// newSpreader returns a spreader for a pool of the given number of workers, or nil where the
// system offers no placement, or where the workers outnumber the CPUs they may use: they
// would meet at most pieces, and a free CPU would rarely be found for the system calls it
// takes to look (then the pool runs as before).
func newSpreader(workers int, placer cpuPlacer) *spreader {
	if placer == nil || workers < 2 || workers > placer.allowedCPUs() {
		return nil
	}
	s := &spreader{placer: placer, where: make([]atomic.Int32, workers)}
	for i := range s.where {
		s.where[i].Store(-1)
	}
	return s
}

// enter is called by worker w before it runs a piece.
func (s *spreader) enter(w int) {
	cpu := s.placer.currentCPU()
	if cpu >= 0 && s.busy(w, cpu) && !s.disabled.Load() {
		if to := s.placer.moveTo(s, w); to >= 0 {
			cpu = to
			s.moves.Add(1)
		}
	}
	s.where[w].Store(int32(cpu))
}

// leave is called by worker w after its piece.
func (s *spreader) leave(w int) { s.where[w].Store(-1) }

// busy reports whether a worker other than w runs a piece it started on cpu.
func (s *spreader) busy(w, cpu int) bool {
	for i := range s.where {
		if i != w && int(s.where[i].Load()) == cpu {
			return true
		}
	}
	return false
}
