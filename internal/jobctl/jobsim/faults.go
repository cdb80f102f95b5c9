package jobsim

import (
	"fmt"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/jobctl"
)

// addNode makes a live node at addr, seen by no one yet.
func (w *World) addNode(addr string) *node {
	n := newNode(w, addr)
	w.nodes[addr] = n
	w.order = append(w.order, addr)
	w.views[addr] = map[string]bool{}
	w.started[addr] = int64(len(w.order))
	w.adm[addr] = cluster.NewAdmission()
	return n
}

// horizon is when the faults of a schedule happen: within the time a fault-free job takes
// (about MaxIter iterations) and as long again.
func (w *World) horizon() time.Duration {
	return 2 * time.Duration(w.data.spec.Stop.MaxIter+5) * (w.opt.IterCost + 8*w.opt.Latency)
}

// at returns a random delay within the horizon.
func (w *World) at() time.Duration {
	if at := w.opt.Faults.At; at > 0 {
		return at
	}
	return time.Duration(w.rng.Int64N(int64(w.horizon())))
}

// scheduleFaults plans the schedule's faults, from now (the job was accepted).
func (w *World) scheduleFaults() {
	f := w.opt.Faults
	for i := range f.Slow {
		w.nodes[w.order[(1+i)%len(w.order)]].slow = true
	}
	for i := range f.FullDisks {
		w.nodes[w.order[(len(w.order)-1-i+len(w.order))%len(w.order)]].full = true
	}
	if f.ClientDies {
		w.after(w.at(), w.client.die)
	}
	for range f.Kills {
		w.after(w.at(), func() {
			// Any live node but the coordinator's and its standby's (those are their own faults).
			if cands := w.bystanders(); len(cands) > 0 {
				w.kill(cands[w.rng.IntN(len(cands))])
			}
		})
	}
	if f.Rack > 0 {
		w.after(w.at(), func() {
			// Consecutive nodes from a random one, skipping the coordinator's and the standby's.
			from := w.rng.IntN(len(w.order))
			var rack []string
			for i := 0; i < len(w.order) && len(rack) < f.Rack; i++ {
				a := w.order[(from+i)%len(w.order)]
				if n := w.nodes[a]; n.alive && len(n.coords) == 0 && !w.isStandby(a) {
					rack = append(rack, a)
				}
			}
			w.logf("rack of %d nodes dies", len(rack))
			for _, a := range rack {
				w.kill(a)
			}
		})
	}
	if f.KillCoordinator {
		w.after(w.at(), func() {
			for _, a := range w.order {
				if n := w.nodes[a]; n.alive && len(n.coords) > 0 {
					if !w.replicated() {
						// Replication to the standby is asynchronous: a coordinator lost before
						// its state arrived loses the job (the client is told).
						w.stats.Unreplicated++
						w.unreplicated = true
					}
					w.kill(a)
					return
				}
			}
		})
	}
	if f.KillStandby {
		w.after(w.at(), func() {
			for _, a := range w.order {
				if w.nodes[a].alive && w.isStandby(a) {
					w.kill(a)
					return
				}
			}
		})
	}
	for range f.Joins {
		w.after(w.at(), func() {
			n := w.addNode(fmt.Sprintf("n%d", len(w.order)))
			w.stats.Joined++
			w.logf("%s joins", n.addr)
			for _, a := range w.order {
				up := a != n.addr && w.reachable(n.addr, a)
				if up && w.admit(n.addr, w.claim(a)) != "" {
					w.violation("%s refused the member %s", n.addr, a)
				}
				w.see(n.addr, a, up)
			}
			w.reconcileLater()
		})
	}
	for range f.Partitions {
		w.after(w.at(), func() {
			// A random side, of 1 to half the nodes, is cut off.
			live := w.liveWorkers(w.order[0])
			size := 1 + w.rng.IntN(max(len(w.order)/2, 1))
			w.stats.Partitioned++
			for range size {
				w.group[w.order[w.rng.IntN(len(w.order))]] = 1
			}
			w.logf("partition: %v cut off from %v", w.side(1), live)
			w.reconcileLater()
			heal := w.opt.DetectDelay/2 + time.Duration(w.rng.Int64N(int64(6*w.opt.DetectDelay)))
			w.after(heal, func() {
				for a := range w.group {
					w.group[a] = 0
				}
				w.logf("partition healed")
				w.reconcileLater()
			})
		})
	}
	// Last, so that the schedules without them draw as they did.
	for i := range f.Forgers {
		w.after(w.at(), func() { w.forge(fmt.Sprintf("forger%d", i), false) })
	}
	for i := range f.Duplicates {
		w.after(w.at(), func() { w.forge(fmt.Sprintf("twin%d", i), true) })
	}
	for range f.Restarts {
		w.after(w.at(), func() {
			cands := w.bystanders()
			if len(cands) == 0 {
				return
			}
			a, disk := cands[w.rng.IntN(len(cands))], w.rng.IntN(2) == 0
			w.kill(a)
			// Back once the others' gossip saw it gone (a new instance: a leave, then a join).
			back := 2*w.opt.DetectDelay + time.Duration(w.rng.Int64N(int64(4*w.opt.DetectDelay)))
			w.after(back, func() { w.restart(a, disk) })
		})
	}
	for range f.FillDisks {
		w.after(w.at(), func() {
			cands := w.bystanders()
			if len(cands) == 0 {
				return
			}
			n := w.nodes[cands[w.rng.IntN(len(cands))]]
			n.filled = true
			w.logf("%s's disk is full", n.addr)
			w.after(w.opt.DetectDelay+time.Duration(w.rng.Int64N(int64(6*w.opt.DetectDelay))), func() {
				n.filled = false
				w.logf("%s's disk has room again", n.addr)
			})
		})
	}
}

// bystanders are the live nodes that run neither a coordinator nor a standby: the nodes
// the faults of shards and reducers hit.
func (w *World) bystanders() []string {
	var out []string
	for _, a := range w.order {
		if n := w.nodes[a]; n.alive && len(n.coords) == 0 && !w.isStandby(a) {
			out = append(out, a)
		}
	}
	return out
}

// restart starts the process of a dead node again, empty: with the disk it had (its
// checkpoint copies) or a new one. It is a new instance (a new start time), which the others'
// gossip sees join.
func (w *World) restart(addr string, disk bool) {
	n := w.nodes[addr]
	if n.alive {
		return
	}
	w.stats.Restarted++
	w.logf("%s restarts, %s", addr, map[bool]string{true: "with its disk", false: "on a new disk"}[disk])
	n.alive = true
	n.incarnation++
	if !disk {
		n.store = map[storeKey]*record{}
	}
	w.started[addr] = w.now().UnixNano()
	w.views[addr], w.lists[addr], w.adm[addr] = map[string]bool{}, nil, cluster.NewAdmission()
	w.reconcileLater()
}

// side lists the nodes in a partition group.
func (w *World) side(g int) []string {
	var out []string
	for _, a := range w.order {
		if w.group[a] == g {
			out = append(out, a)
		}
	}
	return out
}

// isStandby tells whether the node at addr holds a job's replicated state.
func (w *World) isStandby(addr string) bool { return len(w.nodes[addr].standby) > 0 }

// kill kills a node; the others' gossip sees it after DetectDelay.
func (w *World) kill(addr string) {
	w.logf("kill %s", addr)
	w.stats.Killed++
	if w.nodes[addr].keeps["jsim"] && w.client.answers == 0 {
		// The job's answer was lost on the way and the node keeping it dies: the job is
		// done, but its client cannot learn it (a double fault the runtime does not cover).
		w.stats.AnswersLost++
		w.answerLost = true
	}
	w.nodes[addr].kill()
	w.reconcileLater()
	w.after(w.opt.DetectDelay, func() { w.client.coordinatorGone(addr) })
}

// reconcileLater has every node's gossip catch up with what happened, each after the
// detection delay and some jitter.
func (w *World) reconcileLater() {
	for _, a := range w.order {
		d := w.opt.DetectDelay + time.Duration(w.rng.Int64N(int64(w.opt.DetectDelay/4)+1))
		w.after(d, func() { w.reconcile(a) })
	}
}

// reconcile updates the node's view of the membership to what it can reach now, telling it
// of every change: leaves (dead for a node that is) and joins.
func (w *World) reconcile(a string) {
	n := w.nodes[a]
	if !n.alive {
		return
	}
	view := w.views[a]
	for _, b := range w.order {
		if b == a {
			continue
		}
		up := w.reachable(a, b)
		if view[b] == up {
			continue
		}
		if up {
			if cause := w.admit(a, w.claim(b)); cause != "" {
				w.violation("%s refused the member %s: %s", a, b, cause)
				return
			}
		} else {
			w.adm[a].Forget(cluster.ClaimOf(w.claim(b)))
		}
		w.see(a, b, up)
		w.logf("%s sees %s %s", a, b, map[bool]string{true: "join", false: "leave"}[up])
		n.memberEvent(jobctl.MemberEvent{Join: up, Dead: !up, Worker: true, Name: b, Addr: b})
	}
}

// replicated tells whether a live node other than the coordinator's holds the job's state.
func (w *World) replicated() bool {
	for _, a := range w.order {
		if n := w.nodes[a]; n.alive && len(n.coords) == 0 && len(n.standby) > 0 {
			return true
		}
	}
	return false
}
