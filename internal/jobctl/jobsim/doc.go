// Package jobsim simulates whole distributed NMF jobs in one goroutine, on a simulated clock
// and network, with seeded faults, as FoundationDB and TigerBeetle test their systems.
//
// What runs is real where it decides: the control of every coordinator is a jobctl.Job (the
// one package actors' coordinator actor runs); every shard's control is a
// jobctl.ShardDriver (the one actors' shard runs: assignments and rollback in place,
// grants, the stop rule, checkpoint cadence and retention, report batching) around a real
// kernels.Machine; every node of the reduce tree is a jobctl.Reducer (the one the reducer
// actor runs), fed the wire's chunked Partial and Reduced messages, so a job that ends with a
// result must give the bits of kernels.Run; and the client's lease is the jobctl.LeaseClient
// actors.Client runs, the coordinators checking theirs every simulated second. The simulated
// shard only turns the world's messages and timers into its driver's events and carries out
// its Ready, as actors/shard.go does. Every node's host is the production jobctl.Host, the
// machine actors' host actor runs: it admits jobs and shards, fences old epochs (a superseded
// assignment is answered Placed.Superseded by the host, as in production; so is a commit of a
// superseded coordinator dropped), takes a job over as its standby, forgets a job whose
// coordinator is gone after HostConfig.Orphan, and keeps a job's answer for a client whose
// lease renewal finds the coordinator gone. The simulated node is only its adapter, as
// actors/host.go is: it spawns and stops coordinators, shards and reducers, reserves the
// node's memory when it spawns one and gives it back on HostReady.Releases, arms the orphan
// checks, and keeps checkpoint copies on a disk, only as the buddy the host's Buddies name,
// pruned as commits and the drivers' retention say. What is still simulated is the world: the
// gossip, which sees a node dead, cut off or back after a detection delay; the network, one
// ordered link per pair of nodes with latency; and the client's giving a job up when its
// coordinator's node dies and nobody takes it over (as server.Client does).
//
// A schedule (Options.Faults) loses, duplicates and delays messages (delays reorder
// messages of different links); kills nodes, the coordinator's and its standby's included,
// or a rack of them; restarts nodes, empty, with their disk or on a new one; partitions the
// cluster and heals it; makes nodes slow, checkpoint copies corrupt and disks full, for the
// whole run or a while; stalls connections (Faults.Stall); has nodes join mid-job; kills the
// client (Faults.ClientDies: its coordinator must cancel the job when its lease runs out);
// and has a client announce its input and never stream it (Faults.NeverStreams), which the
// shards' jobctl.StreamWatch must reap. A job may have a time limit (Options.TimeLimit):
// the coordinator then grants iterations and stops the shards when it passed. Run checks,
// as the run goes:
//
//   - no two coordinators act in one epoch, and no shard goes back to an earlier epoch;
//   - no shard ends an iteration past the last one its coordinator granted;
//   - a host never carries out a shard assignment of an earlier epoch than one it carried
//     out for a job it still keeps;
//   - a checkpoint is committed only once every shard wrote it and a buddy kept each
//     shard's copy; no live node drops a copy of a checkpoint the acting coordinator
//     committed and may still fall back to (nodes that die lose theirs, and a job's end
//     removes them);
//
// and, after every schedule:
//
//   - the job ends within the simulated deadline;
//   - with a result whose factors are bitwise the fault-free ones (the caller compares them
//     with Problem.Reference, or Problem.ReferenceAt for a job its time limit stopped), every
//     shard's replica of B the same and handed over at the result's iteration, the history
//     counting each iteration once (and, unless the job recovered, every iteration); or, only
//     under faults beyond one lost node, with an error that names why (no majority,
//     coordinator and standby both lost, ...);
//   - no job actor is left on a node that could hear of the end;
//   - no reservation outlives its actor or its job: every live node reserves exactly what the
//     actors it still runs hold.
//
// The tests run 10,000 schedules of DID (go test; 1,000 with -short) and 600 of each other
// distributed algorithm; -sim.schedules N runs more, and a failing schedule prints its seed,
// which -sim.seed replays with a trace. TestSimulatorFindsPlantedBugs plants each bug of
// jobctl/internal/bugs in turn (in the coordinator, the reducers, the shard drivers, the hosts
// and the lease; the driver's stale-assignment bug sits behind the host's fence and is planted
// with it) and
// logs the schedule that found it:
//
//	go test ./internal/jobctl/jobsim -run TestSimulatedJobs -sim.schedules 1000000
//	go test ./internal/jobctl/jobsim -run TestSimulatedJobs -sim.seed 4105 -v
//
// The lease is checked too: a live client's job is never canceled for its lease. A
// coordinator tells the client of itself (JobAccepted, with its epoch) until the client's first
// renewal, so a lost acceptance does not leave the client without a coordinator to renew; and
// the client follows the highest epoch it heard of, dropping the cancel of a coordinator that
// was superseded by a takeover (cut off, then healed) and whose lease ran out because the
// client renews its successor (Stats.StaleWords counts what it dropped).
//
// TestPlanAtScale runs 1,000 nodes and 10,000 shards and reports the control's decision
// times and messages per iteration, with and without a rack of 50 nodes dying.
//
// Known gaps, which the simulation shows and counts rather than hides:
//
//   - replication to the standby is asynchronous, so a coordinator that dies within a
//     message's latency of its placement loses the job (Stats.Unreplicated; the client is
//     told);
//   - a job's final answer lost on the way is sent again by the host that keeps it when the
//     client's lease renewal finds the coordinator gone, unless that node dies first
//     (Stats.AnswersLost);
//   - a StopJob lost to a partition leaves the job's actors on the cut-off node
//     (Stats.Orphans) unless its coordinator's node is gone, which hosts notice
//     (Timeouts.Orphan);
//   - a coordinator cut off in a partition that heals can run the job to its end next to its
//     successor, the client keeping the first answer (Stats.LateAnswers; both are the same
//     bits);
//   - a coordinator superseded by a takeover (cut off, then healed) runs on next to its
//     successor for a while, and its CheckpointCommitted prunes checkpoint copies: a host that
//     knows a later epoch of the job drops it (the commit carries its epoch), but one that has
//     not yet heard of the successor (it took the job over on the other side of the partition
//     and has not reached this node) prunes, and the successor may then miss the checkpoint it
//     falls back to (Stats.PrunedBySuperseded counts such copies; 0 in the 10,000 schedules of
//     go test, and schedule 19777 of -sim.schedules 40000 shows one);
//   - shard 0 reports its iterations in bursts (jobctl.ShardDriverReportInterval), so a
//     checkpoint may be committed, and replicated, before the reports of its last iterations
//     arrive: a job that recovers to it has no history point for them (their times are the
//     mean of the others').
package jobsim
