// Package jobctl is the control of a distributed NMF job as a deterministic state machine,
// in the style of etcd's raft RawNode: the decisions a coordinator makes, with no clock, no
// network and no files.
//
// A Job is fed events with Step and says what to do with Ready:
//
//	j := jobctl.New(cfg, submit)
//	j.Step(now, jobctl.Begin{Samples: n, Features: m, Reserve: need, Nodes: nodes, Pongs: pongs})
//	for {
//		rd := j.Ready()
//		for _, s := range rd.Sends { send(s.To, s.Msg) }        // assignments, grants, results...
//		if rd.Pings != nil { go ping(rd.Pings) }                // answers come back as Pongs
//		for _, t := range rd.Timers { afterFunc(t.After, t) }   // come back as TimerFired
//		if rd.Commit != nil { go commitFiles(rd.Commit) }       // comes back as OutputCommitted
//		if rd.Over { break }
//		j.Step(time.Now(), <-events)                            // wire messages, MemberEvent, Tick...
//	}
//
// Events are the job's wire messages (*messages.Placed, IterationDone, ShardDone,
// ReducerDone, CheckpointDone, ActorFailed, JobError) and the runtime's own (Begin, TakeOver,
// Abort, Cancel, LeaseRenewed, Tick, TimerFired, Pongs, OutputCommitted, MemberEvent). Step
// checks a message's job and epoch once, for every handler: a message of an epoch that ended
// is stale and changes nothing. An event Step does not take is an error, and New refuses a
// Config that Validate refuses (a fan-in that is not a power of two, say).
//
// The control is split by concern, one file each:
//
//	plan.go         the placement and data-fit plan, pure functions: Prepare checks the spec
//	                against the data and the cluster (jobspec.Spec.CheckOn, the one check of
//	                a job), reserves each shard's footprint and names the nodes to ping;
//	                PlanPlacement, the one place shards are placed, gives each shard's node,
//	                columns and reserve (round-robin over nodes the spec names, else
//	                cluster.Place within each machine's free memory), or a usererr saying why
//	                the job does not fit
//	placement.go    applying the plan: buddies, the standby and the reduce tree
//	recovery.go     rollback to a checkpoint, quorum, standby and takeover
//	progress.go     placement acknowledgements, iterations, grants and the time limit
//	checkpoints.go  the automatic cadence and checkpoint commits
//	result.go       the end: shards and reducers done, the result, errors
//
// Beside the Job, the other actors' decisions are machines of the same kind:
//
//	reducer.go      Reducer, a node of the reduce tree: what it takes, drops and combines
//	                (Gather, in canonical order), what it sends up and down (a reduce-scatter
//	                child gets its own segments), when a corrupted chunk fails the job
//	host.go         Host, a node's host: what the node admits (its limits, each owner's
//	                quotas), which coordinator and epoch of a job it serves (an assignment of
//	                an earlier epoch is answered Placed.Superseded, whoever sent it; a StopJob
//	                of an earlier epoch is ignored; an earlier tree's reducers stop), when it
//	                takes a job over as its standby, when it forgets a job whose coordinator's
//	                node left and nobody took over (the orphan timer), how many failures of a
//	                job's actors it restarts (HostConfig.MaxRestarts), which checkpoint
//	                commits may prune its copies (not a superseded coordinator's), and the
//	                answers of ended jobs it keeps, for a while, for clients whose answer was
//	                lost. One record per job and a map of the node's
//	                live actors; the node's memory stays with the runtime (the shards share
//	                it): assignments carry what is used, and Ready asks to spawn, stop,
//	                forget, send, reply, arm an orphan timer and release
//	sharddriver.go  ShardDriver, a shard's control: which assignment it serves (a later epoch
//	                rolls it back in place), how far it may run (grants, the time limit), the
//	                stop rule, when it checkpoints and which uncommitted checkpoints it keeps,
//	                and how its progress reports are batched; the runtime steps the kernels
//	                machine, writes the checkpoints and sends what Ready says
//	lease.go        the lease of a job that is not detached: LeaseClient, the client's end
//	                (when to renew, what a dead letter means, when the job is lost, which
//	                coordinator to follow: the highest epoch it heard of, dropping a lower
//	                one's acceptance or error as stale), and LeaseWatch, the coordinator's
//	                (when the client is gone, and telling the client of itself again at every
//	                tick until its first renewal, so that a lost JobAccepted costs a tick)
//
// Their stories are data-driven tests, as etcd's raft has them: testdata/job (a rollback, a
// takeover, a partition that pauses the job and one that fails it), testdata/host (admission,
// fencing and a superseded assignment, takeover, orphans, restarts, kept answers, commits),
// testdata/sharddriver (grants, the stop rule, the time limit, checkpoints, rollback in place,
// report batching), testdata/reducer and testdata/lease, each command printing what the
// machine asks its runtime to do, readable without Go (run the tests with -rewrite after a
// deliberate change, and read the diff).
//
// Job history. A Job publishes its JobInfo for its node's job board (Ready.Info): sizes,
// placement, the stop rule in words, the submit time, recoveries, checkpoints, epoch, its spec,
// its convergence history thinned to MaxInfoHistory points (evenly, the last kept) and its
// timeline of events (started, checkpoint, failure, recovered, takeover, paused, resumed,
// ended; the latest MaxInfoEvents), every time taken from the events stepped. When it ends it
// builds its record (Ready.Record: state done, failed or canceled, with why it stopped or the
// error's kind, message, field and template) and sends it as a JobRecord, after its StopJobs,
// to its own node's host and to its standby's. A Host keeps one record per job (a later
// epoch's replaces an earlier one's) for HostConfig.HistoryTime, at most HostConfig.HistoryMax
// of them, the oldest first to go (HostRecord; Records lists them), and a record ends the
// standby state of the job it replaces. A recovery that begins is told in Ready.Recoveries
// with its RecoveryCause, for the node's metrics.
//
// Owners. A submission from the node's own process (Local) keeps the owner its SubmitJob
// names, or "local" when it names none: the node's HTTP service submits through a client actor
// in the node's actor system for the identity it authenticated, so that the job, its quotas
// on every node and its listing are that identity's. A submission from a client or a peer is
// always its authenticated caller's, whatever the message says.
//
// The coordinator, host, shard, reducer and client actors (package actors) are adapters around these
// machines: they run pings and file I/O outside their mailboxes and feed their completions
// back as events.
//
// The simulator (jobctl/jobsim) runs these machines themselves, not copies: every coordinator
// is a Job, every shard a ShardDriver around a real kernels.Machine, every reduce-tree node a
// Reducer, the client's lease a LeaseClient; hosts, gossip, network and disks are simulated.
// Its seeded schedules kill, restart (with or without their disk) and partition nodes; lose,
// duplicate, delay and stall messages; corrupt checkpoints and fill disks; and give jobs time
// limits. It checks as it runs that no two coordinators act in one epoch, no shard goes back
// to an earlier epoch or past its grant, a checkpoint is committed only once every shard wrote
// it and a buddy kept it, and no live node drops a checkpoint its coordinator may fall back
// to; every job ends with the fault-free bits or a stated error. Deliberate bugs
// (jobctl/internal/bugs, planted through Config.Bugs and ShardDriverConfig.Bugs) prove that
// it bites: each must be found within 2,000 schedules.
package jobctl
