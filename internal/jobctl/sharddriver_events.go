package jobctl

import (
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// The events a ShardDriver takes: the shard's control messages from its coordinator
// (ShardAssignment, StartJob, Grant, Finish, CheckpointAt), from its reducer (Reduced) and its
// buddy (CheckpointStored), each with what of it the driver needs, and the runtime's own
// (what the machine reached, a machine built, a checkpoint written). Events that need the
// time carry it (At).

// ShardDriverAssign is a ShardAssignment for the shard: its first, or a recovery's.
type ShardDriverAssign struct {
	Job   string
	Shard int64
	Epoch uint64
	// ResumeFrom is the committed checkpoint the shard resumes from (0: the start).
	ResumeFrom int64
	// Buddy is set when the shard's checkpoints are copied to another node.
	Buddy bool
}

// ShardDriverBuilt tells that the machine the driver asked for (Ready.Load) is built, on the
// job's spec: its deterministic stop rule (the time limit is the coordinator's), its
// checkpoint_every, and, for a machine resumed from a checkpoint, the stop rule's History
// saved in it.
type ShardDriverBuilt struct {
	Rule            kernels.StopRule
	CheckpointEvery int64
	History         []float64
}

// ShardDriverStart is the coordinator's StartJob received at At: every shard and reducer is
// placed, and the shard may run up to iteration Granted (NoGrant: no limit).
type ShardDriverStart struct {
	Job     string
	Epoch   uint64
	Granted int64
	At      time.Time
}

// ShardDriverGrant is the coordinator's Grant: the shard may run up to iteration Granted.
type ShardDriverGrant struct {
	Job     string
	Epoch   uint64
	Granted int64
}

// ShardDriverStopAt is the coordinator's Finish: stop at the end of iteration At (the job's
// time limit), or pause at the next boundary when At is negative (the coordinator lost its
// quorum and will send a recovery assignment).
type ShardDriverStopAt struct {
	Job   string
	Epoch uint64
	At    int64
}

// ShardDriverCheckpointAt is the coordinator's CheckpointAt (automatic cadence): checkpoint at
// the end of Iteration.
type ShardDriverCheckpointAt struct {
	Job       string
	Epoch     uint64
	Iteration int64
}

// ShardDriverCollective tells that the machine, stepped, reached a collective (of the
// initialisation when Init) at iteration Iteration.
type ShardDriverCollective struct {
	Iteration int64
	Init      bool
}

// ShardDriverResultChunk is a chunk of a collective's result (Reduced) from the reducer: of
// collective Seq, for the shards [Lo, Hi).
type ShardDriverResultChunk struct {
	Job    string
	Epoch  uint64
	Seq    uint64
	Lo, Hi int64
}

// ShardDriverReduced tells that the awaited collective's result is whole at At (its chunks
// taken as Ready.TakeChunk asked, and of the length the collective gives).
type ShardDriverReduced struct{ At time.Time }

// ShardDriverBoundary tells that the machine, stepped, reached the end of Iteration at At,
// with the objective and the initial objective; for a masked job, its mask's counts and
// held-out errors (Mask nil otherwise).
type ShardDriverBoundary struct {
	Iteration          int64
	Objective, Initial float64
	At                 time.Time
	// InitEnded is when the machine had its initial factors (kernels.Machine.InitEnded),
	// zero if unknown: the initialisation's time runs to it when it is later than the last
	// initialisation collective's result.
	InitEnded      time.Time
	Mask           *messages.MaskStats
	TestSSE        float64
	InitialTestSSE float64
}

// ShardDriverFailed tells that the shard failed (its machine, a result, or writing its
// factors): the runtime reported the error to the coordinator, and the shard does nothing
// more.
type ShardDriverFailed struct{}

// ShardDriverCheckpointWritten tells that the checkpoint of Epoch at Iteration, asked by
// Ready.Checkpoints, is in the node's store at At (its bytes Data), or why not (Err).
type ShardDriverCheckpointWritten struct {
	Epoch     uint64
	Iteration int64
	Data      []byte
	Err       error
	At        time.Time
}

// ShardDriverCheckpointStored is the buddy's answer (CheckpointStored) at At: it keeps its
// copy of the checkpoint at Iteration, or why not (Err).
type ShardDriverCheckpointStored struct {
	Job       string
	Shard     int64
	Iteration int64
	Err       error
	At        time.Time
}
