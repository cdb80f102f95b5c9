package kernels

import (
	"runtime"
	"sync"
)

// Pool runs independent pieces of work on a fixed set of goroutines. Work inside a shard is
// split into lanes whose boundaries depend only on the data's shape (see laneBounds), never on
// the number of workers, and lane results are combined in lane order: the result of a job is
// bitwise the same whatever the thread count.
//
// A worker yields its processor after each piece (runtime.Gosched), and so does a Run done
// in its caller, between pieces: Go does not preempt a running goroutine for a runnable one
// before 10 ms, and a node's messages (a reducer's result for other nodes, sent just before
// this node's own shards start their step) would otherwise wait for the whole step. With
// the yield they wait at most one lane, so a node runs as many Go processors as workers. (It
// used to run one more, reserved for the transport; on a machine whose cores the kernels
// fill, that extra processor moved the shards' goroutines between threads, about 25 000
// context switches a second, and made the driver's 1e6 x 5 iteration 1.25-1.4x slower.)
//
// Workers running pieces at the same time are moved apart when they meet on one CPU (see
// spreader).
type Pool struct {
	workers int
	tasks   chan poolTask
	spread  *spreader // nil: no placement
	once    sync.Once
}

type poolTask struct {
	fn func(int)
	i  int
	wg *sync.WaitGroup
}

// NewPool starts a pool of the given number of workers (runtime.GOMAXPROCS(0) if workers < 1).
func NewPool(workers int) *Pool {
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &Pool{workers: workers}
	if workers > 1 {
		p.tasks = make(chan poolTask, 4*workers)
		p.spread = newSpreader(workers, systemPlacer())
		for w := 0; w < workers; w++ {
			go p.work(w)
		}
	}
	return p
}

func (p *Pool) work(w int) {
	for t := range p.tasks {
		if p.spread != nil {
			p.spread.enter(w)
		}
		t.fn(t.i)
		if p.spread != nil {
			p.spread.leave(w)
		}
		t.wg.Done()
		runtime.Gosched()
	}
}

// Workers returns the number of workers.
func (p *Pool) Workers() int { return p.workers }

// Run calls fn(i) for i in [0, n) on the pool's workers and returns when all calls are done.
// Calls may run in any order and concurrently; fn must write only to state owned by index i.
// Run must not be called from inside fn.
func (p *Pool) Run(n int, fn func(i int)) { p.RunOrder(n, nil, fn) }

// RunOrder is Run with the pieces handed to the workers in the order given, a permutation of
// [0, n) (see laneOrder: the heaviest lanes first, so that the last piece to start is a short
// one); a nil order hands them out in index order. Where results are combined in index order,
// the order changes when each piece runs, never the bits. Run alone (one worker, one piece)
// takes the pieces in index order.
func (p *Pool) RunOrder(n int, order []int, fn func(i int)) {
	if n == 1 || p.workers == 1 || p.tasks == nil {
		for i := 0; i < n; i++ {
			if i > 0 {
				runtime.Gosched()
			}
			fn(i)
		}
		return
	}
	// Calls may overlap (shards share a pool), so each has its own WaitGroup, reused across
	// calls so that an iteration allocates nothing.
	wg := waitGroups.Get().(*sync.WaitGroup)
	wg.Add(n)
	for j := 0; j < n; j++ {
		i := j
		if order != nil {
			i = order[j]
		}
		p.tasks <- poolTask{fn: fn, i: i, wg: wg}
	}
	wg.Wait()
	waitGroups.Put(wg)
}

// waitGroups recycles Run's WaitGroups.
var waitGroups = sync.Pool{New: func() any { return new(sync.WaitGroup) }}

// Close stops the workers. Run must not be called after Close.
func (p *Pool) Close() {
	p.once.Do(func() {
		if p.tasks != nil {
			close(p.tasks)
		}
	})
}

// Lane sizing: a shard's columns are cut into at most maxLanes contiguous lanes of at least
// minLaneCols columns, and fewer when the per-lane partial sums (about rows*k floats each)
// would exceed lanePartialBudget floats in total.
const (
	maxLanes          = 16
	minLaneCols       = 256
	lanePartialBudget = 1 << 23
)

// laneBounds cuts a block into lanes, a function of its shape and k alone: contiguous runs of
// equal numbers of columns (ColumnRanges of laneCount), the same cut for a dense block and for
// its CSC form (stored zeros or not), so that the lanes' partial sums group alike and the two
// layouts give the same bits (TestLayoutSameBits), whichever layout LayoutAutoPath picks on a
// machine. Columns are samples, seldom sorted by size, and the pool hands lanes to workers as
// they free, so a sparse block's lanes balance without cutting at stored-entry counts.
func laneBounds(x Block, k int) []int {
	rows, cols := x.Dims()
	return ColumnRanges(cols, laneCount(rows, cols, k))
}

// laneCount is the number of lanes of laneBounds for a rows x cols block at rank k.
func laneCount(rows, cols, k int) int {
	lanes := (cols + minLaneCols - 1) / minLaneCols
	if lanes > maxLanes {
		lanes = maxLanes
	}
	if per := rows*k + k*k + 8; lanes*per > lanePartialBudget {
		lanes = lanePartialBudget / per
	}
	if lanes < 1 {
		lanes = 1
	}
	return lanes
}
