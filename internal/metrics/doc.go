// Package metrics exposes a didnmf node's metrics for Prometheus (client_golang), on a
// registry of the node's own (never the process-wide default one, so that the nodes of one
// process, as in a test cluster, keep theirs apart).
//
// A node's events reach it as they happen through actors.Observer, which *Metrics
// implements (NodeConfig.Observer = m); the node's state (members, jobs, memory, drops,
// gossip) is read when Prometheus scrapes, through the functions of Config, so nothing polls:
//
//	m := metrics.New(metrics.Config{Version: version, Members: ..., Jobs: node.JobsByState, ...})
//	cfg.Observer = m                // actors.NodeConfig
//	mux.Handle("/metrics", m.Handler())
//
// The families, all per node, in base units, counters ending in _total, and no label whose
// values are unbounded (no job ids; causes and states from fixed sets, "other" for the rest):
//
//	didnmf_members{state}                       gauge: members this node's gossip knows, by state (alive, suspect, dead, left)
//	didnmf_jobs{state}                          gauge: live jobs coordinated here, by state (placing, running, recovering, paused)
//	didnmf_iterations_total                     counter: job iterations ended by the shard 0s on this node (once per iteration across the cluster)
//	didnmf_iteration_duration_seconds           histogram: their wall time
//	didnmf_allreduce_duration_seconds           histogram: a collective's latency, for each shard here, from sending its part to having the result
//	didnmf_sent_bytes_total{plane}              counter: bytes written on the actor remote, the data plane and the gossip port
//	didnmf_received_bytes_total{plane}          counter: bytes read on them
//	didnmf_checkpoint_duration_seconds          histogram: a shard's checkpoint, snapshot to written (successful ones)
//	didnmf_checkpoint_failures_total            counter: checkpoints that failed
//	didnmf_recoveries_total{cause}              counter: recoveries begun by jobs coordinated here, by cause (jobctl.RecoveryCauses)
//	didnmf_memory_offered_bytes                 gauge: bytes of job data the node offers (0: no limit)
//	didnmf_memory_reserved_bytes                gauge: bytes the shards placed here reserve
//	didnmf_guard_drops_total{cause}             counter: messages and connections from the network dropped, by class (actors.DropClasses)
//	didnmf_gossip_health_score                  gauge: memberlist's awareness score (0: healthy; higher: slow to answer probes)
//	didnmf_build_info{version,goversion}        gauge: 1
//
// with the Go runtime's (go_*) and the process's (process_*) collectors.
package metrics
