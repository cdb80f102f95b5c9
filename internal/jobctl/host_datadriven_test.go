package jobctl

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// TestHostData runs the scenarios in testdata/host: one file per behavior of a node's host
// (admission and limits, epoch fencing, takeover, orphans, restarts, kept answers), each
// command an event and its output what the host asked for (its Ready). See
// testdata/host/README.txt for the commands; -rewrite rewrites the outputs.
func TestHostData(t *testing.T) {
	runScenarios(t, "testdata/host", func() func(*testing.T, *datadriven.TestData) string { return (&hostEnv{}).handle })
}

// hostEnv is the world of one host in a scenario: its node's memory (what its spawned shards
// reserved, by owner), the spawns that are to fail, and the actors it asked to stop.
type hostEnv struct {
	h        *Host
	now      time.Duration
	used     int64
	held     map[string]int64
	failNext string   // the error of the next spawn ("" : it succeeds)
	stopping []string // actors asked to stop and not stopped yet
}

const hostNode = "n1"

// coordPid is the PID of a job's coordinator on a node.
func coordPid(node, job string) *messages.Pid {
	return &messages.Pid{Address: node, Id: HostName + "/" + CoordinatorName(job)}
}

var hostClient = &messages.Pid{Address: "client", Id: "c"}

func (e *hostEnv) handle(t *testing.T, td *datadriven.TestData) string {
	var out strings.Builder
	job, coord, owner := "j", "n2", ""
	var epoch uint64
	td.MaybeScanArgs(t, "job", &job)
	td.MaybeScanArgs(t, "coord", &coord)
	td.MaybeScanArgs(t, "owner", &owner)
	td.MaybeScanArgs(t, "epoch", &epoch)
	local := td.HasArg("local")
	var cpid *messages.Pid
	if coord != "none" {
		cpid = coordPid(coord, job)
	}
	switch td.Cmd {
	case "host":
		cfg := HostConfig{Node: hostNode, MaxRestarts: 20, Orphan: 3 * time.Minute}
		td.MaybeScanArgs(t, "memory", &cfg.Memory)
		td.MaybeScanArgs(t, "max-shards", &cfg.MaxShards)
		td.MaybeScanArgs(t, "max-jobs", &cfg.MaxJobs)
		td.MaybeScanArgs(t, "owner-memory", &cfg.OwnerMemory)
		td.MaybeScanArgs(t, "owner-max-shards", &cfg.OwnerMaxShards)
		td.MaybeScanArgs(t, "owner-max-jobs", &cfg.OwnerMaxJobs)
		td.MaybeScanArgs(t, "restarts", &cfg.MaxRestarts)
		td.MaybeScanArgs(t, "history-max", &cfg.HistoryMax)
		var keep string
		td.MaybeScanArgs(t, "history-time", &keep)
		if keep != "" {
			cfg.HistoryTime = e.duration(t, keep)
		}
		h, err := NewHost(cfg)
		if err != nil {
			return err.Error()
		}
		*e = hostEnv{h: h, held: map[string]int64{}}
		return "ok"
	case "tick":
		var d string
		td.ScanArgs(t, "d", &d)
		e.now += e.duration(t, d)
		return fmt.Sprintf("now %v", e.now)
	case "fail-next-spawn":
		td.ScanArgs(t, "err", &e.failNext)
		return "ok"
	case "submit":
		sub := &messages.SubmitJob{JobId: job, Client: hostClient, OwnerToken: "token-of-" + job}
		td.MaybeScanArgs(t, "says", &sub.Owner) // the owner the message names
		ev := HostSubmit{Submit: sub, Peer: td.HasArg("peer") || local, Local: local, Caller: owner}
		var specErr string
		td.MaybeScanArgs(t, "spec-error", &specErr)
		if specErr != "" {
			ev.SpecError = usererr.New(specErr, nil)
		}
		e.step(t, &out, ev)
	case "shard":
		a := &messages.ShardAssignment{JobId: job, Epoch: epoch, Coordinator: cpid, Client: hostClient, Owner: owner}
		td.ScanArgs(t, "shard", &a.Shard)
		ev := HostShardAssign{Assignment: a, Local: local, Ended: td.HasArg("ended"), Reserve: 100, MemoryUsed: e.used, OwnerHeld: e.held[owner]}
		td.MaybeScanArgs(t, "reserve", &ev.Reserve)
		td.MaybeScanArgs(t, "used", &ev.MemoryUsed)
		e.step(t, &out, ev)
	case "reducer":
		a := &messages.ReducerAssignment{JobId: job, Epoch: epoch, Coordinator: cpid, Hi: 2}
		td.MaybeScanArgs(t, "level", &a.Level)
		td.MaybeScanArgs(t, "lo", &a.Lo)
		td.MaybeScanArgs(t, "hi", &a.Hi)
		e.step(t, &out, HostReducerAssign{Assignment: a, Local: local, Ended: td.HasArg("ended")})
	case "stop":
		e.step(t, &out, HostStop{Stop: &messages.StopJob{JobId: job, Epoch: epoch, Coordinator: cpid}, Local: local})
	case "commit":
		c := &messages.CheckpointCommitted{JobId: job, Epoch: epoch, Shards: 2}
		td.ScanArgs(t, "iteration", &c.Iteration)
		td.ScanArgs(t, "keep-from", &c.KeepFrom)
		e.step(t, &out, HostCheckpointCommitted{Commit: c})
	case "buddies":
		b := &messages.Buddies{JobId: job, Epoch: epoch, Coordinator: cpid}
		td.MaybeScanArgs(t, "shards", &b.Shards)
		td.MaybeScanArgs(t, "every", &b.CheckpointEvery)
		e.step(t, &out, HostBuddies{Buddies: b, Local: local})
		var shards []string
		for s := int64(0); s < 8; s++ {
			if ok, _ := e.h.KeepsCopies(job, s); ok {
				shards = append(shards, fmt.Sprint(s))
			}
		}
		_, every := e.h.KeepsCopies(job, 0)
		fmt.Fprintf(&out, "keeps copies of %s's shards [%s], checkpoint every %d\n", job, strings.Join(shards, " "), every)
	case "state":
		sub := &messages.SubmitJob{JobId: job, Client: hostClient, Owner: owner}
		e.step(t, &out, HostJobState{State: &messages.JobState{Submit: sub, Epoch: epoch, Coordinator: cpid}})
	case "member-left":
		var node string
		td.ScanArgs(t, "node", &node)
		e.step(t, &out, HostMemberLeft{Name: "m-" + node, Addr: node})
	case "orphan-check":
		e.step(t, &out, HostOrphanCheck{Job: job, Coordinator: coord, Member: td.HasArg("member")})
	case "failed":
		var name, reason string
		td.ScanArgs(t, "actor", &name)
		td.MaybeScanArgs(t, "reason", &reason)
		e.step(t, &out, HostChildFailed{ID: childID(name), Reason: reason})
	case "stopped":
		var names []string
		if td.HasArg("all") {
			names, e.stopping = e.stopping, nil
		} else {
			var name string
			td.ScanArgs(t, "actor", &name)
			names = []string{childID(name)}
			e.stopping = slices.DeleteFunc(e.stopping, func(s string) bool { return s == names[0] })
		}
		for _, id := range names {
			fmt.Fprintf(&out, "%s stopped:\n", id)
			e.step(t, &out, HostChildStopped{ID: id})
		}
	case "keep-answer":
		var token, msg string
		td.ScanArgs(t, "token", &token)
		td.ScanArgs(t, "error", &msg)
		e.step(t, &out, HostAnswerKept{Job: job, Token: token, Answer: &messages.JobError{JobId: job, Message: msg}, At: time.Unix(0, 0).Add(e.now)})
	case "renew":
		var token string
		td.ScanArgs(t, "token", &token)
		e.step(t, &out, HostLeaseRenew{Renew: &messages.LeaseRenew{JobId: job, OwnerToken: token}, At: time.Unix(0, 0).Add(e.now)})
	case "record":
		info := &messages.JobInfo{JobId: job, Owner: owner, Epoch: epoch, State: messages.JobPhase_JOB_PHASE_DONE}
		var state string
		td.MaybeScanArgs(t, "state", &state)
		if state != "" {
			if err := info.State.UnmarshalText([]byte(state)); err != nil {
				td.Fatalf(t, "%v", err)
			}
		}
		var points int
		td.MaybeScanArgs(t, "points", &points)
		for i := range points {
			info.History = append(info.History, &messages.HistoryPoint{Iteration: int64(i)})
		}
		e.step(t, &out, HostRecord{Record: &messages.JobRecord{Info: info}, At: time.Unix(0, 0).Add(e.now)})
	case "records":
		var lines []string
		for _, r := range e.h.Records(time.Unix(0, 0).Add(e.now), func(i *messages.JobInfo) bool { return owner == "" || i.Owner == owner }) {
			lines = append(lines, fmt.Sprintf("%s %s epoch %d owner %q", r.JobId, r.State.Name(), r.Epoch, r.Owner))
		}
		if len(lines) == 0 {
			return "none"
		}
		return strings.Join(lines, "\n")
	case "load":
		l := e.h.Load(!td.HasArg("owner"), owner)
		return fmt.Sprintf("jobs [%s], %d actors, %d shards, %d B reserved; node memory used %d B %v",
			strings.Join(l.Jobs, " "), l.Actors, l.Shards, l.Reserved, e.used, e.held)
	case "submission":
		if s := e.h.Submission(job); s != nil {
			return fmt.Sprintf("%s owned by %q", s.JobId, s.Owner)
		}
		return "none"
	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

// step feeds an event and prints the Ready, carrying out its spawns (one fails if the
// scenario said so: it is stepped back) and its memory.
func (e *hostEnv) step(t *testing.T, out *strings.Builder, ev any) {
	if err := e.h.Step(ev); err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		return
	}
	rd := e.h.Ready()
	e.print(out, rd)
	for _, s := range rd.Spawns {
		if e.failNext != "" {
			err := e.failNext
			e.failNext = ""
			fmt.Fprintf(out, "%s cannot be spawned:\n", s.Name)
			e.step(t, out, HostSpawnFailed{Name: s.Name, Err: err})
			continue
		}
		e.used += s.Reserve
		if s.Reserve != 0 {
			e.held[s.Owner] += s.Reserve
		}
	}
	for _, r := range rd.Releases {
		e.used -= r.Bytes
		if e.held[r.Owner] -= r.Bytes; e.held[r.Owner] == 0 {
			delete(e.held, r.Owner)
		}
	}
	e.stopping = append(e.stopping, rd.Stops...)
	for _, f := range rd.Forget {
		e.stopping = append(e.stopping, f.Actors...)
	}
}

// print writes a Ready, one effect a line.
func (e *hostEnv) print(out *strings.Builder, rd HostReady) {
	for _, l := range rd.Logs {
		var attrs []string
		for _, a := range l.Attrs {
			attrs = append(attrs, a.String())
		}
		fmt.Fprintf(out, "log %s: %s %s\n", l.Level, l.Msg, strings.Join(attrs, " "))
	}
	for _, d := range rd.Drops {
		fmt.Fprintf(out, "drop: %s\n", d)
	}
	for _, s := range rd.Stops {
		fmt.Fprintf(out, "stop %s\n", s)
	}
	for _, f := range rd.Forget {
		how := "ended"
		if !f.Ended {
			how = "orphaned"
		}
		fmt.Fprintf(out, "forget %s (%s), stop [%s]\n", f.Job, how, strings.Join(f.Actors, " "))
	}
	for _, s := range rd.Spawns {
		fmt.Fprintf(out, "spawn %s: %s of %s", s.Name, s.Role.Name(), s.Job)
		if s.Owner != "" {
			fmt.Fprintf(out, ", owner %s", s.Owner)
		}
		if s.Reserve != 0 {
			fmt.Fprintf(out, ", reserve %d B", s.Reserve)
		}
		if s.Takeover != nil {
			fmt.Fprintf(out, ", taking over epoch %s: %s", EpochString(s.Takeover.Epoch), s.Cause)
		}
		out.WriteString("\n")
	}
	for _, s := range rd.Sends {
		fmt.Fprintf(out, "send to %s/%s: %s\n", s.To.GetAddress(), s.To.GetId(), hostMsg(s.Msg))
	}
	if rd.Reply != nil {
		fmt.Fprintf(out, "reply: %s\n", hostMsg(rd.Reply))
	}
	for _, tm := range rd.Timers {
		fmt.Fprintf(out, "timer in %v: orphan check of %s (coordinator on %s)\n", tm.After, tm.Job, tm.Coordinator)
	}
	for _, r := range rd.Releases {
		fmt.Fprintf(out, "release %d B of %q\n", r.Bytes, r.Owner)
	}
	for _, c := range rd.Prunes {
		fmt.Fprintf(out, "prune %s's checkpoints before iteration %d (commit of epoch %d)\n", c.JobId, c.KeepFrom, c.Epoch)
	}
	for _, g := range rd.Gone {
		fmt.Fprintf(out, "gone %s\n", g)
	}
	if rd.Idle {
		out.WriteString("idle\n")
	}
}

// hostMsg shows a message the host sends, briefly.
func hostMsg(m proto.Message) string {
	switch m := m.(type) {
	case *messages.Placed:
		s := fmt.Sprintf("Placed %s epoch=%d", m.Actor, m.Epoch)
		switch {
		case m.Superseded != 0:
			s += fmt.Sprintf(" superseded=%d", m.Superseded)
		case m.Ended:
			s += " ended"
		case m.Error != "":
			s += " error: " + m.Error
		}
		return s
	case *messages.JobError:
		return fmt.Sprintf("JobError %s (%s): %s", m.JobId, strings.TrimPrefix(m.Kind.String(), "ERROR_KIND_"), m.Message)
	case *messages.ActorFailed:
		if m.Role == messages.ActorRole_ACTOR_ROLE_SHARD {
			return fmt.Sprintf("ActorFailed %s (shard %d) on %s: %s", m.Actor, m.Shard, m.Node, m.Reason)
		}
		return fmt.Sprintf("ActorFailed %s (%s) on %s: %s", m.Actor, m.Role.Name(), m.Node, m.Reason)
	case *messages.ShardAssignment:
		return fmt.Sprintf("ShardAssignment shard=%d epoch=%d", m.Shard, m.Epoch)
	case *messages.LeaseAck:
		return "LeaseAck " + m.JobId
	}
	return fmt.Sprintf("%T", m)
}

func (e *hostEnv) duration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
