package actors

import (
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// DefaultFanIn is the reduce tree's default fan-in (see jobspec.DefaultFanIn).
const DefaultFanIn = jobspec.DefaultFanIn

// The ingest modes of JobSpec.Ingest (see jobspec.IngestShared and jobspec.IngestStream).
const (
	// IngestShared: every node reads its shards' rows of the input files itself. The default.
	IngestShared = jobspec.IngestShared
	// IngestStream: the client reads the input and streams each shard its block.
	IngestStream = jobspec.IngestStream
)

// StopRuleOf converts a kernels stop rule to the wire form.
func StopRuleOf(r kernels.StopRule) *messages.StopRule { return jobspec.StopRuleOf(r) }
