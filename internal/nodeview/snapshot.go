package nodeview

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/messages"
)

// snapshot is what the view answers reads from.
type snapshot struct {
	cluster httpapi.ClusterView
	// jobs are every job listed, by id, with history and events.
	jobs map[string]httpapi.JobView
	// self is this node's host's answer (nil: it did not answer; selfErr says why).
	self    *messages.Pong
	selfErr error
}

// cpuSample is a member's CPU time at an answer, for Load.
type cpuSample struct {
	started int64 // the member instance's Meta.Started: a restart starts over
	at      time.Time
	seconds float64
}

// Warning thresholds.
const (
	// memoryWarn is the share of a member's offered memory reserved past which the
	// snapshot warns that new shards may not fit.
	memoryWarn = 0.9
)

// refresh takes a snapshot: every known member's state, each live member's load and jobs,
// asked all at once; then publishes it and wakes the streams.
func (v *View) refresh() {
	now := time.Now()
	known := v.srv.Members.Known()
	self := v.srv.Members.Local()
	root := v.srv.Node.System().Root
	type asked struct {
		k            cluster.KnownMember
		status, list actor.Future
	}
	var members []asked
	for _, k := range known {
		if k.Meta.Role != cluster.RoleMember {
			continue // clients are not members (a cluster without proofs lists them)
		}
		a := asked{k: k}
		// Only live members are asked: a suspect one is being reported gone, and a request to
		// a node that dies would leave an endpoint redialing it after its death was handled
		// (the node's own dialer refusing each attempt, counted as drops).
		if k.State == cluster.StateAlive {
			pid := actors.HostPID(k.Meta.Actor)
			a.status = root.RequestFuture(pid, &messages.HostStatus{}, v.cfg.AskTimeout)
			a.list = root.RequestFuture(pid, &messages.ListJobs{Detail: true, Ended: true}, v.cfg.AskTimeout)
		}
		members = append(members, a)
	}

	snap := snapshot{jobs: map[string]httpapi.JobView{}, selfErr: fmt.Errorf("the node is not among its own members")}
	view := httpapi.ClusterView{Self: self.Name, Version: v.cfg.Version, UnixMs: now.UnixMilli(), Members: []httpapi.MemberView{}, Warnings: []string{}}
	infos := map[string]*messages.JobInfo{}
	seen := map[string]bool{}
	for _, a := range members {
		mv := memberView(a.k)
		if a.k.Name == self.Name {
			mv.Version = v.cfg.Version
		}
		if a.status == nil {
			view.Members = append(view.Members, mv)
			continue
		}
		res, err := a.status.Result()
		pong, ok := res.(*messages.Pong)
		if err != nil || !ok {
			mv.Error = fmt.Sprintf("no answer from %s: %v", a.k.Meta.Actor, errText(err))
			if a.k.Name == self.Name {
				snap.selfErr = fmt.Errorf("no answer: %v", errText(err))
			}
		} else {
			seen[a.k.Name] = true
			v.fromPong(&mv, a.k, pong, now, &view.Warnings)
			if a.k.Name == self.Name {
				snap.self, snap.selfErr = pong, nil
			}
		}
		if res, err := a.list.Result(); err == nil {
			if list, ok := res.(*messages.JobList); ok {
				for _, j := range list.GetJobs() {
					if newer(j, infos[j.GetJobId()]) {
						infos[j.GetJobId()] = j
					}
				}
			}
		}
		view.Members = append(view.Members, mv)
	}
	for name := range v.cpu {
		if !seen[name] {
			delete(v.cpu, name)
			delete(v.drop, name)
		}
	}
	view.Warnings = append(stateWarnings(view.Members), view.Warnings...)
	for id, j := range infos {
		snap.jobs[id] = jobView(j)
	}

	v.mu.Lock()
	for id, a := range v.attached {
		a.merge(snap.jobs, id)
	}
	for id, jv := range snap.jobs {
		jv.Outputs = v.outputNames(id)
		snap.jobs[id] = jv
	}
	snap.cluster = view
	v.snap = snap
	close(v.updated)
	v.updated = make(chan struct{})
	v.mu.Unlock()
}

// errText is err's text, or "a wrong answer" for a nil error with an unexpected answer.
func errText(err error) string {
	if err == nil {
		return "a wrong answer"
	}
	return err.Error()
}

// memberView is a known member before its host answers.
func memberView(k cluster.KnownMember) httpapi.MemberView {
	return httpapi.MemberView{Name: k.Name, State: string(k.State), Role: "member", Gossip: k.Gossip, Actor: k.Meta.Actor,
		Version: k.Meta.Version, HTTP: k.Meta.HTTP, Cores: k.Meta.Cores, MemoryOffered: k.Meta.Memory, StartedUnixMs: k.Meta.Started / int64(time.Millisecond)}
}

// fromPong fills in a member's load from its host's answer, and adds the warnings it calls
// for: memory nearly all reserved, refused messages rising.
func (v *View) fromPong(mv *httpapi.MemberView, k cluster.KnownMember, p *messages.Pong, now time.Time, warnings *[]string) {
	mv.Machine, mv.Threads = p.GetMachine(), int(p.GetThreads())
	if c := int(p.GetCores()); c > 0 {
		mv.Cores = c
	}
	mv.MemoryOffered, mv.MemoryReserved = p.GetMemory(), p.GetReserved()
	mv.Jobs, mv.Shards, mv.Actors = int(p.GetJobs()), int(p.GetShards()), int(p.GetActors())
	prev, had := v.cpu[k.Name]
	if had && prev.started == k.Meta.Started {
		wall := now.Sub(prev.at).Seconds()
		if wall > 0 && mv.Cores > 0 {
			mv.Load = finite(min(max((p.GetCpuSeconds()-prev.seconds)/wall/float64(mv.Cores), 0), 1))
		}
	}
	v.cpu[k.Name] = cpuSample{started: k.Meta.Started, at: now, seconds: p.GetCpuSeconds()}

	if mv.MemoryOffered > 0 && float64(mv.MemoryReserved) >= memoryWarn*float64(mv.MemoryOffered) {
		*warnings = append(*warnings, fmt.Sprintf("member %s has %s of its %s of memory reserved: new shards may not fit there",
			k.Name, cluster.FormatBytes(mv.MemoryReserved), cluster.FormatBytes(mv.MemoryOffered)))
	}
	drops, causes := dropCount(p.GetDrops())
	if last, ok := v.drop[k.Name]; ok && drops > last {
		*warnings = append(*warnings, fmt.Sprintf("member %s refused %d messages since the last look (all told: %s)",
			k.Name, drops-last, strings.Join(causes, ", ")))
	}
	v.drop[k.Name] = drops
}

// dropCount sums a Pong's drops ("cause=count" each) and returns them as given.
func dropCount(drops []string) (int64, []string) {
	var n int64
	for _, d := range drops {
		if i := strings.LastIndexByte(d, '='); i >= 0 {
			if c, err := strconv.ParseInt(d[i+1:], 10, 64); err == nil && c > 0 {
				n += c
			}
		}
	}
	return n, drops
}

// stateWarnings are the warnings about members' states: suspect, dead, and (F's meta)
// mixed versions.
func stateWarnings(members []httpapi.MemberView) []string {
	var out []string
	versions := map[string][]string{}
	for _, m := range members {
		switch cluster.State(m.State) {
		case cluster.StateSuspect:
			out = append(out, fmt.Sprintf("member %s (%s) is suspect: the gossip reports it gone and it is being checked", m.Name, m.Gossip))
		case cluster.StateDead:
			out = append(out, fmt.Sprintf("member %s (%s) is dead: it stopped answering without leaving", m.Name, m.Gossip))
		}
		if m.Version != "" && (m.State == string(cluster.StateAlive) || m.State == string(cluster.StateSuspect)) {
			versions[m.Version] = append(versions[m.Version], m.Name)
		}
	}
	if len(versions) > 1 {
		var parts []string
		for ver, names := range versions {
			parts = append(parts, fmt.Sprintf("%s on %s", ver, strings.Join(names, ", ")))
		}
		sort.Strings(parts)
		out = append(out, "members run different versions: "+strings.Join(parts, "; "))
	}
	return out
}

// ended tells whether a job record is an ended job's.
func ended(j *messages.JobInfo) bool {
	switch j.GetState() {
	case messages.JobPhase_JOB_PHASE_DONE, messages.JobPhase_JOB_PHASE_FAILED, messages.JobPhase_JOB_PHASE_CANCELED:
		return true
	}
	return j.GetEndedUnixMs() != 0
}

// newer tells whether record a of a job replaces record b (nil: none) when members list
// the same job: the higher epoch (a standby that took the job over, or its new coordinator
// after a takeover) wins; at the same epoch an ended record beats a running one (a
// coordinator that ended the job while its standby still shows it running), and otherwise
// the one further on wins.
func newer(a, b *messages.JobInfo) bool {
	if b == nil {
		return true
	}
	if a.GetEpoch() != b.GetEpoch() {
		return a.GetEpoch() > b.GetEpoch()
	}
	if ea, eb := ended(a), ended(b); ea != eb {
		return ea
	}
	return a.GetIteration() > b.GetIteration()
}

// jobView converts a job's record.
func jobView(j *messages.JobInfo) httpapi.JobView {
	jv := httpapi.JobView{ID: j.GetJobId(), Owner: j.GetOwner(), Coordinator: j.GetCoordinator(), Rank: j.GetRank(),
		Shards: j.GetShards(), Samples: j.GetSamples(), Features: j.GetFeatures(), State: phaseName(j),
		Iteration: j.GetIteration(), MaxIter: j.GetMaxIter(), Seconds: j.GetSeconds(), RelErr2: j.GetRelErr2(),
		Rate: j.GetRate(), StopRule: j.GetStopRule(), Stop: j.GetStop(), Detached: j.GetDetached(), OutShared: j.GetOutShared(),
		ShardNodes: slices.Clone(j.GetShardNodes()), Recoveries: j.GetRecoveries(), Checkpoints: j.GetCheckpoints(),
		Epoch: j.GetEpoch(), SubmittedUnixMs: j.GetSubmittedUnixMs(), EndedUnixMs: j.GetEndedUnixMs()}
	if a, err := jobspec.AlgorithmOf(j.GetAlgorithm()); err == nil {
		jv.Algorithm = string(a)
	}
	if w := j.GetSpec(); w != nil {
		if spec, err := jobspec.FromWire(w); err == nil {
			jv.Spec = httpapi.EncodeSpec(spec)
		}
	}
	if !ended(j) && jv.Rate > 0 && jv.MaxIter > jv.Iteration {
		jv.ETASeconds = float64(jv.MaxIter-jv.Iteration) / jv.Rate
	}
	if ended(j) && jv.EndedUnixMs == 0 {
		jv.EndedUnixMs = time.Now().UnixMilli()
	}
	if j.GetErrorKind() != messages.ErrorKind_ERROR_KIND_UNSPECIFIED || j.GetError() != "" {
		jv.Error = &httpapi.ErrorView{Kind: errorKind(j.GetErrorKind()), Field: j.GetErrorField(), Message: j.GetError()}
	}
	for _, p := range j.GetHistory() {
		jv.History = append(jv.History, httpapi.PointView{Iteration: p.GetIteration(), Seconds: p.GetSeconds(),
			RelErr2: p.GetRelErr2(), TestRelErr2: p.GetTestRelErr2()})
	}
	for _, e := range j.GetEvents() {
		jv.Events = append(jv.Events, httpapi.EventView{UnixMs: e.GetUnixMs(), Kind: eventKind(e.GetKind()),
			Iteration: e.GetIteration(), Text: e.GetText()})
	}
	finiteJob(&jv)
	return jv
}

// phaseName is a job's state in the API's words.
func phaseName(j *messages.JobInfo) string {
	switch j.GetState() {
	case messages.JobPhase_JOB_PHASE_PLACING:
		return "placing"
	case messages.JobPhase_JOB_PHASE_RECOVERING:
		return "recovering"
	case messages.JobPhase_JOB_PHASE_PAUSED:
		return "paused"
	case messages.JobPhase_JOB_PHASE_DONE:
		return "done"
	case messages.JobPhase_JOB_PHASE_FAILED:
		return "failed"
	case messages.JobPhase_JOB_PHASE_CANCELED:
		return "canceled"
	}
	if j.GetEndedUnixMs() != 0 {
		switch j.GetErrorKind() {
		case messages.ErrorKind_ERROR_KIND_UNSPECIFIED:
			return "done"
		case messages.ErrorKind_ERROR_KIND_CANCELED:
			return "canceled"
		}
		return "failed"
	}
	return "running"
}

// errorKind is an ended job's error kind in the API's words.
func errorKind(k messages.ErrorKind) string {
	switch k {
	case messages.ErrorKind_ERROR_KIND_INPUT:
		return "user"
	case messages.ErrorKind_ERROR_KIND_CANCELED:
		return "canceled"
	}
	return "failure"
}

// eventKind is a job event's kind in the API's words.
func eventKind(k messages.JobEventKind) string {
	switch k {
	case messages.JobEventKind_JOB_EVENT_KIND_STARTED:
		return "started"
	case messages.JobEventKind_JOB_EVENT_KIND_CHECKPOINT:
		return "checkpoint"
	case messages.JobEventKind_JOB_EVENT_KIND_FAILURE:
		return "failure"
	case messages.JobEventKind_JOB_EVENT_KIND_RECOVERED:
		return "recovered"
	case messages.JobEventKind_JOB_EVENT_KIND_TAKEOVER:
		return "takeover"
	case messages.JobEventKind_JOB_EVENT_KIND_PAUSED:
		return "paused"
	case messages.JobEventKind_JOB_EVENT_KIND_RESUMED:
		return "resumed"
	case messages.JobEventKind_JOB_EVENT_KIND_ENDED:
		return "ended"
	}
	return "unknown"
}

// finiteJob replaces the numbers of a job that JSON cannot carry (NaN, infinities: a job
// whose loss diverged) by 0, so that one such job cannot make the answers that list it
// unencodable.
func finiteJob(jv *httpapi.JobView) {
	for _, x := range []*float64{&jv.Seconds, &jv.RelErr2, &jv.Rate, &jv.ETASeconds} {
		*x = finite(*x)
	}
	for i := range jv.History {
		p := &jv.History[i]
		p.Seconds, p.RelErr2, p.TestRelErr2 = finite(p.Seconds), finite(p.RelErr2), finite(p.TestRelErr2)
	}
	for k, v := range jv.Spec {
		if f, ok := v.(float64); ok {
			jv.Spec[k] = finite(f)
		}
	}
}

// finite is x, or 0 when x is NaN or infinite.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
