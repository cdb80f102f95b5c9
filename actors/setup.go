package actors

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/jobctl"
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// setupDone carries what a coordinator's setup found (Begin) or why the job cannot run
// (Abort) back into its mailbox.
type setupDone struct{ event any }

// setup checks a new job against its data and the nodes it may run on, outside the
// coordinator's mailbox (it opens the input files and pings the nodes): the job's shape,
// rank and shard count, a custom initialisation's shapes, the shared output directory (whose
// partial files it creates), what each shard reserves, and the candidate nodes with their
// answers. self is the coordinator's address.
func (c *coordinator) setup(system *actor.ActorSystem, self string) any {
	spec := c.sub.Spec
	roots := c.node.cfg.Roots
	shape, err := readShape(roots, spec, c.node.cfg.inputBytes())
	if err != nil {
		return jobctl.Abort{Kind: KindInput, Message: err.Error()}
	}
	m, n := shape.m, shape.n
	if err := kernels.CheckRankOf(c.spec.Algo, int(spec.Rank), m, n); err != nil {
		return jobctl.Abort{Kind: KindInput, Message: fmt.Sprintf("%v for %s (%d samples x %d features)", err, shape.name, n, m)}
	}
	if spec.Shards > int64(n) {
		return jobctl.Abort{Kind: KindInput, Message: fmt.Sprintf("shards %d is more than the %d samples of %s", spec.Shards, n, shape.name)}
	}
	if c.spec.Init == kernels.InitCustom && c.spec.Ingest == jobspec.IngestShared {
		// (Streamed, the client read the files and checked them; the shards check what comes.)
		if err := checkCustomInit(roots, spec, m, n); err != nil {
			return jobctl.Abort{Kind: KindInput, Message: err.Error()}
		}
	}
	b := jobctl.Begin{Samples: n, Features: m, Density: shape.density, Reserve: shardNeeds(spec, m, n, shape.density, c.spec.Layout)}
	members := c.node.cfg.Members
	if members != nil {
		for _, w := range members.Workers() {
			b.Workers = append(b.Workers, w.Meta.Actor)
		}
	}
	if len(spec.Nodes) > 0 || members == nil {
		if err := checkNodes(members, spec.Nodes); err != nil {
			return jobctl.Abort{Kind: KindInput, Message: err.Error()}
		}
		addrs := spec.Nodes
		if len(addrs) == 0 {
			addrs = []string{self}
		}
		var first error
		b.Pongs, first = ping(system, addrs, c.node.cfg.Timeouts.Ping)
		if first != nil {
			b.Unreachable = first.Error()
		}
		for _, a := range addrs {
			b.Nodes = append(b.Nodes, jobctl.Node{Name: a, Addr: a})
		}
		b.Fixed = true
	} else {
		workers := members.Workers()
		addrs := make([]string, len(workers))
		for i, w := range workers {
			addrs[i] = w.Meta.Actor
			b.Nodes = append(b.Nodes, jobctl.Node{Name: w.Name, Addr: w.Meta.Actor})
		}
		b.Pongs, _ = ping(system, addrs, c.node.cfg.Timeouts.Ping)
	}
	if spec.OutShared != "" {
		// Last: nothing after it can fail, so the partial files it creates are the job's.
		if err := prepareSharedCoef(roots, spec, c.job, m, n); err != nil {
			removePartials(roots, spec.OutShared, c.job)
			return jobctl.Abort{Kind: KindInput, Message: err.Error()}
		}
		b.OwnsPartial = true
	}
	return b
}

// inputShape is a job's shape as its input files (or a streamed job's spec) give it.
type inputShape struct {
	name    string
	m, n    int
	density float64 // stored entries over M x N when known (sparse inputs), else 0
}

// readShape reads the job's shape: from the inputs when the nodes read them, from the spec
// when the client streams them.
func readShape(roots *fsroot.Roots, spec *messages.JobSpec, maxBytes int64) (inputShape, error) {
	if spec.Ingest == messages.Ingest_INGEST_STREAM {
		if spec.Samples <= 0 || spec.Features <= 0 {
			return inputShape{}, fmt.Errorf("streamed job without a shape (samples %d, features %d)", spec.Samples, spec.Features)
		}
		m, n := int(spec.Features), int(spec.Samples)
		return inputShape{name: strings.Join(spec.Inputs, " + ") + " (streamed by the client)", m: m, n: n,
			density: float64(spec.StoredEntries) / (float64(m) * float64(n))}, nil
	}
	src, err := matio.OpenAllWithOptions(roots.Opener("--input"), spec.Inputs, matio.ReadOptions{Missing: spec.Missing, MaxBytes: maxBytes})
	if err != nil {
		return inputShape{}, err
	}
	defer src.Close()
	s := inputShape{name: src.Name(), m: src.Features(), n: src.Samples()}
	if stored, ok := matio.StoredEntries(src); ok {
		s.density = float64(stored) / (float64(s.m) * float64(s.n))
	}
	return s, nil
}

// checkNodes checks that the nodes a spec names are members of the cluster (on a cluster):
// a coordinator dials only its peers.
func checkNodes(members Members, nodes []string) error {
	if members == nil {
		return nil
	}
	workers := members.Workers()
	for _, a := range nodes {
		if !slices.ContainsFunc(workers, func(w cluster.Member) bool { return w.Meta.Actor == a }) {
			return fmt.Errorf("nodes: %s is not a member of the cluster", a)
		}
	}
	return nil
}

// shardNeeds estimates every shard's memory (see shardFootprint).
func shardNeeds(spec *messages.JobSpec, m, n int, density float64, layout matio.Layout) []int64 {
	p := int(spec.Shards)
	cols := kernels.ColumnRanges(n, p)
	need := make([]int64, p)
	for s := range need {
		need[s] = shardFootprint(int64(m), int64(cols[s+1]-cols[s]), spec.Rank, density, layout)
	}
	return need
}

// shardFootprint estimates the bytes a shard of m features, cols samples and rank k holds: its
// block of X (dense, or CSC when the input's density is known and the layout makes it sparse),
// C and its work copies, and the replicas of B and the products the algorithms keep.
func shardFootprint(m, cols, k int64, density float64, layout matio.Layout) int64 {
	x := 8 * m * cols
	sparse := layout == matio.LayoutSparse || (layout != matio.LayoutDense && density < layout.Crossing())
	if density > 0 && density < 1 && sparse {
		x = int64(12*density*float64(m*cols)) + 8*(cols+1)
	}
	return shardOverhead + x + 8*4*cols*k + 8*8*m*k + 8*4*k*k
}

// checkCustomInit checks the shapes of a custom initialisation before anything is placed.
func checkCustomInit(roots *fsroot.Roots, spec *messages.JobSpec, m, n int) error {
	k := int(spec.Rank)
	for _, f := range []struct {
		path, what string
		rows       int
	}{{spec.InitBasis, "init basis", m}, {spec.InitCoef, "init coef", n}} {
		if f.path == "" {
			continue // a transform's optional warm start
		}
		src, err := matio.OpenWith(roots.Opener("--"+strings.ReplaceAll(f.what, " ", "-")), f.path)
		if err != nil {
			return fmt.Errorf("%s: %v", f.what, err)
		}
		r, cols := src.Samples(), src.Features()
		src.Close()
		if r != f.rows || cols != k {
			return fmt.Errorf("%s %s: shape (%d, %d), want (%d, %d)", f.what, f.path, r, cols, f.rows, k)
		}
	}
	return nil
}

// ping asks every node's host for a sign of life and its load, all at once, and waits for
// the answers (so never from inside an actor's mailbox). It returns them (nil for a node that
// did not answer) and an error naming the first node that did not.
func ping(system *actor.ActorSystem, nodes []string, timeout time.Duration) ([]*messages.Pong, error) {
	futures := make([]actor.Future, len(nodes))
	for i, addr := range nodes {
		futures[i] = system.Root.RequestFuture(HostPID(addr), &messages.Ping{Nonce: uint64(i)}, timeout)
	}
	pongs := make([]*messages.Pong, len(nodes))
	var first error
	for i, f := range futures {
		res, err := f.Result()
		pong, ok := res.(*messages.Pong)
		switch {
		case err != nil:
			err = fmt.Errorf("node %s is unreachable: %v", nodes[i], err)
		case !ok:
			err = fmt.Errorf("node %s answered a ping with %T", nodes[i], res)
		case pong.Address != nodes[i] || pong.Nonce != uint64(i):
			err = fmt.Errorf("node %s: the answer to its ping came from %s", nodes[i], pong.Address)
		}
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		pongs[i] = pong
	}
	return pongs, first
}
