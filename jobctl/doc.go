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
// is stale and changes nothing.
//
// The control is split by concern, one file each:
//
//	placement.go    where shards, buddies, the standby and the reduce tree go (cluster.Place)
//	recovery.go     rollback to a checkpoint, quorum, standby and takeover
//	progress.go     placement acknowledgements, iterations, grants and the time limit, lease
//	checkpoints.go  the automatic cadence and checkpoint commits
//	result.go       the end: shards and reducers done, the result, errors
//
// The coordinator actor (package actors) is a thin adapter around a Job: it runs pings and
// file I/O outside its mailbox and feeds their completions back as events. Package
// jobctl/jobsim runs Jobs with simulated shards (real kernels machines), reducers, nodes and
// network on a simulated clock, with seeded faults, and checks every schedule ends with the
// fault-free bits or a clear error.
package jobctl
