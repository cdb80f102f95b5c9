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
//	placement.go    where shards, buddies, the standby and the reduce tree go (cluster.Place)
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
//	lease.go        the lease of a job that is not detached: LeaseClient, the client's end
//	                (when to renew, what a dead letter means, when the job is lost), and
//	                LeaseWatch, the coordinator's (when the client is gone)
//
// Their stories are data-driven tests, as etcd's raft has them: testdata/job (a rollback, a
// takeover, a partition that pauses the job and one that fails it), testdata/reducer and
// testdata/lease, each command printing what the machine asks its runtime to do, readable
// without Go (run the tests with -rewrite after a deliberate change, and read the diff).
//
// The coordinator, reducer and client actors (package actors) are thin adapters around these
// machines: they run pings and file I/O outside their mailboxes and feed their completions
// back as events. Package jobctl/jobsim runs the same machines, with simulated shards (real
// kernels machines), hosts and network on a simulated clock, with seeded faults, and checks
// every schedule ends with the fault-free bits or a clear error; jobctl/internal/bugs names
// the deliberate bugs its bite test plants in the machines, each of which the schedules must
// find.
package jobctl
