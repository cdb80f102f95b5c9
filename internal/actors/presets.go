package actors

// NodePreset returns a node's configuration with every limit, quota and wait set explicitly
// to what a zero field would take: capacity 1, DefaultMaxShards, DefaultMaxJobs, DefaultLease,
// DefaultMaxRestarts, the owner quotas derived from them and from memory (a quarter of the
// jobs and shards, three quarters of the memory, DefaultOwnerMaxStreams), and the waits t
// (DefaultLAN or Loopback).
// threads are the kernel workers and memory the bytes of job data the node accepts. The
// caller adds the rest (data directory, credentials, ports) and changes what it needs; a
// changed limit does not change the quotas derived from it.
func NodePreset(t Timeouts, threads int, memory int64) NodeConfig {
	c := NodeConfig{Threads: threads, Memory: memory, Capacity: 1, MaxShards: DefaultMaxShards, MaxJobs: DefaultMaxJobs,
		Lease: DefaultLease, MaxRestarts: DefaultMaxRestarts, Timeouts: t}
	resolveQuotas(&c)
	return c
}
