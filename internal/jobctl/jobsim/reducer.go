package jobsim

import (
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// reducer is a node of the reduce tree: the production jobctl.Reducer (the one the reducer
// actor runs), fed the messages the simulated network delivers; what it sends goes back on
// the network.
type reducer struct {
	n   *node
	a   *messages.ReducerAssignment
	pid *messages.Pid
	r   *jobctl.Reducer
	// stale and dups are the reducer's counts already added to the world's stats.
	stale, dups int64
}

// newReducer builds the reducer of an assignment; a malformed one is refused, as the actor
// refuses it (the error goes back in Placed).
func newReducer(n *node, a *messages.ReducerAssignment, id string) (*reducer, error) {
	r, err := jobctl.NewReducer(a, n.addr, n.w.opt.Bugs)
	return &reducer{n: n, a: a, pid: &messages.Pid{Address: n.addr, Id: id}, r: r}, err
}

func (r *reducer) receive(msg any) {
	w := r.n.w
	if err := r.r.Step(msg); err != nil {
		return // a message no reducer takes: the actor logs and drops it too
	}
	rd := r.r.Ready()
	stale, dups := r.r.Dropped()
	w.stats.StaleAtReducers += int(stale - r.stale)
	w.stats.DuplicatesDropped += int(dups - r.dups)
	r.stale, r.dups = stale, dups
	for _, s := range rd.Sends {
		w.send(r.n.addr, s.To, s.Msg)
	}
	if rd.Stopped {
		delete(r.n.reducers, r.pid.Id)
		r.n.hostStep(jobctl.HostChildStopped{ID: r.pid.Id})
	}
}
