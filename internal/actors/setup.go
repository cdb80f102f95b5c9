package actors

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// setupDone carries what a coordinator's setup found (Begin) or why the job cannot run
// (Abort) back into its mailbox.
type setupDone struct{ event any }

// setup sets a new job up, outside the coordinator's mailbox: it reads the data's shape
// (and a custom initialisation's shapes), pings the candidate nodes, and creates the shared
// output directory's partial files. What it decides between (the spec checked against the
// data and the cluster, what each shard reserves, which nodes to ask) is jobctl.Prepare's,
// and where the shards go jobctl.PlanPlacement's, which the control calls on Begin. self is
// the coordinator's address.
func (c *coordinator) setup(system *actor.ActorSystem, self string) any {
	spec := c.sub.Spec
	roots := c.node.cfg.Roots
	shape, err := readShape(roots, spec, c.node.cfg.inputBytes())
	if err != nil {
		return jobctl.Abort{Kind: KindInput, Message: err.Error(), Err: err}
	}
	b, err := jobctl.Prepare(c.spec, &shape, self, workerNodes(c.node.cfg.Members))
	if err != nil {
		return jobctl.Abort{Kind: KindInput, Message: err.Error(), Err: err}
	}
	addrs := make([]string, len(b.Nodes))
	for i, nd := range b.Nodes {
		addrs[i] = nd.Addr
	}
	var first error
	b.Pongs, first = ping(system, addrs, c.node.cfg.Timeouts.Ping)
	if first != nil && b.Fixed {
		b.Unreachable = first.Error()
	}
	// The shards this node has planned for other jobs and the members may not count yet
	// (jobs set up at once), so that the plan spreads them.
	b.Pongs = c.node.placing.Claim(c.job, self, b, time.Now())
	if spec.OutShared != "" {
		// Last: nothing after it can fail, so the partial files it creates are the job's.
		if err := prepareSharedCoef(roots, spec, c.job, shape.Features, shape.Samples); err != nil {
			removePartials(roots, spec.OutShared, c.job)
			return jobctl.Abort{Kind: KindInput, Message: err.Error(), Err: err}
		}
		b.OwnsPartial = true
	}
	return b
}

// workerNodes returns the cluster's workers as placement candidates (nil: not a cluster).
func workerNodes(members Members) []jobctl.Node {
	if members == nil {
		return nil
	}
	nodes := []jobctl.Node{}
	for _, w := range members.Workers() {
		nodes = append(nodes, jobctl.Node{Name: w.Name, Addr: w.Meta.Actor})
	}
	return nodes
}

// checkSubmitted is a node's check of a job submitted to it, before anything is started for
// it: the spec alone and where it runs (jobspec.Spec.CheckOn without the data, which setup
// checks once it has read the shape). members are the cluster's (nil: not a cluster).
func checkSubmitted(spec *messages.JobSpec, members Members) error {
	s, err := jobspec.FromWire(spec)
	if err != nil {
		return err
	}
	return s.CheckOn(nil, jobspec.Cluster{Where: jobspec.OnNode, Members: workerAddrs(members)})
}

// workerAddrs returns the actor addresses of the cluster's workers (nil: not a cluster).
func workerAddrs(members Members) []string {
	nodes := workerNodes(members)
	if nodes == nil {
		return nil
	}
	addrs := make([]string, len(nodes))
	for i, nd := range nodes {
		addrs[i] = nd.Addr
	}
	return addrs
}

// readOptions are the options a node reads a wire spec's input with, at most maxBytes an
// input.
func readOptions(spec *messages.JobSpec, maxBytes int64) (matio.ReadOptions, error) {
	o, err := jobspec.ReadOptionsOf(spec)
	o.MaxBytes = maxBytes
	return o, err
}

// readShape reads the job's shape, and a custom initialisation's shapes when the nodes read
// its files: from the inputs when the nodes read them, from the spec when the client streams
// them (the client read the factor files and checked them; the shards check what comes).
func readShape(roots *fsroot.Roots, spec *messages.JobSpec, maxBytes int64) (jobspec.Shape, error) {
	if spec.Ingest == messages.Ingest_INGEST_STREAM {
		if spec.Samples <= 0 || spec.Features <= 0 {
			return jobspec.Shape{}, fmt.Errorf("streamed job without a shape (samples %d, features %d)", spec.Samples, spec.Features)
		}
		return jobspec.Shape{Name: strings.Join(spec.Inputs, " + ") + " (streamed by the client)", Samples: int(spec.Samples),
			Features: int(spec.Features), StoredEntries: spec.StoredEntries}, nil
	}
	opts, err := readOptions(spec, maxBytes)
	if err != nil {
		return jobspec.Shape{}, err
	}
	src, err := matio.OpenAllWithOptions(roots.Opener("input"), spec.Inputs, opts)
	if err != nil {
		return jobspec.Shape{}, err
	}
	defer src.Close()
	d := jobspec.Shape{Name: src.Name(), Samples: src.Samples(), Features: src.Features()}
	if stored, ok := matio.StoredEntries(src); ok {
		d.StoredEntries = stored
	}
	if spec.Init != messages.Init_INIT_CUSTOM {
		return d, nil
	}
	for _, f := range []struct {
		path, field string
		shape       **[2]int
	}{{spec.InitBasis, "init_basis", &d.InitBasis}, {spec.InitCoef, "init_coef", &d.InitCoef}} {
		if f.path == "" {
			continue // a transform's optional warm start
		}
		src, err := matio.OpenWith(roots.Opener(f.field), f.path)
		var ue *usererr.Error
		switch {
		case errors.As(err, &ue) && ue.Field == f.field && ue.Error() == err.Error():
			return jobspec.Shape{}, err // the node's refusal of the path names the field already
		case err != nil:
			return jobspec.Shape{}, usererr.Field(f.field, "{"+f.field+"}: %w", err)
		}
		*f.shape = &[2]int{src.Samples(), src.Features()}
		src.Close()
	}
	return d, nil
}

// shardFootprint estimates the bytes a shard holds (see jobspec.ShardFootprint).
func shardFootprint(m, cols, k int64, density float64, layout matio.Layout) int64 {
	return jobspec.ShardFootprint(m, cols, k, density, layout)
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
