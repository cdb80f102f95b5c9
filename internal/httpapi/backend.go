package httpapi

import (
	"context"
	"errors"
	"io"

	"github.com/didnmf/didnmf/internal/jobspec"
)

// Backend is the node and cluster the service shows and controls. The service calls it from
// many request goroutines at once: every method must be safe for concurrent use, and none may
// block past its context. Reads (Cluster, Jobs, Job) answer from a snapshot the backend keeps
// fresh (about twice a second), so that a hundred streams cost the cluster nothing more than
// one.
type Backend interface {
	// Cluster returns the members as this node sees them, with their load.
	Cluster(ctx context.Context) (ClusterView, error)
	// Jobs returns the running jobs and the ended ones the members still keep, without
	// history or events, by id; owner "" lists every owner's.
	Jobs(ctx context.Context, owner string) ([]JobView, error)
	// Job returns one job with its history and events, or ErrNotFound.
	Job(ctx context.Context, id string) (JobView, error)
	// Submit starts a job on the cluster for owner and returns its id. The spec is checked
	// (Check, then against the data where the node reads it): an error that is the user's
	// wraps usererr.ErrUser. A job with OutShared runs detached, its outputs written there;
	// without, the backend collects its outputs for Output.
	Submit(ctx context.Context, owner string, spec *jobspec.Spec) (string, error)
	// Cancel cancels a running job (ErrNotFound when no member runs it).
	Cancel(ctx context.Context, id string) error
	// Output opens an output of an ended job by name: "report.json", "coef.npy",
	// "basis.npy", or a picture "figures/NAME.png"; ErrNotFound when the job has none of
	// that name here. The caller closes it.
	Output(ctx context.Context, id, name string) (io.ReadCloser, error)
	// Ready returns nil when the node has joined its cluster and can take shards, else why
	// not (for /readyz).
	Ready() error
	// Updated returns a channel that is closed when the next snapshot is taken (as a
	// context's Done: call it again after each close). Streams wait on it; a slow reader
	// holds nothing of the backend's.
	Updated() <-chan struct{}
}

// ErrNotFound is the backend's error for a job (or an output) no member knows.
var ErrNotFound = errors.New("not found")

// ClusterView is the cluster as one node sees it (GET /api/v1/cluster, and the dashboard's
// stream).
type ClusterView struct {
	// Self is the name of the node that answers; Version its build.
	Self    string `json:"self"`
	Version string `json:"version"`
	// Members are every node this one knows of, by name, whatever their state.
	Members []MemberView `json:"members"`
	// Warnings are what an operator should know now (a member suspect or dead, mixed
	// versions, a node short of memory, refused messages), in words.
	Warnings []string `json:"warnings"`
	// UnixMs is when the snapshot was taken.
	UnixMs int64 `json:"unix_ms"`
}

// MemberView is one member.
type MemberView struct {
	Name string `json:"name"`
	// State is alive, suspect, left or dead (memberlist's view from this node).
	State string `json:"state"`
	// Role is "member" (clients are not members).
	Role   string `json:"role"`
	Gossip string `json:"gossip"`
	Actor  string `json:"actor"`
	// HTTP is the base URL of the member's own dashboard and API, when it serves one.
	HTTP    string `json:"http,omitempty"`
	Machine string `json:"machine,omitempty"`
	Version string `json:"version,omitempty"`
	Cores   int    `json:"cores"`
	Threads int    `json:"threads"`
	// Memory offered for job data and reserved by the shards on it, in bytes.
	MemoryOffered  int64 `json:"memory_offered"`
	MemoryReserved int64 `json:"memory_reserved"`
	// Jobs with actors on the member, its shards and actors.
	Jobs   int `json:"jobs"`
	Shards int `json:"shards"`
	Actors int `json:"actors"`
	// Load is how busy its cores were since the last snapshot, 0 to 1 (CPU seconds over
	// wall seconds times cores; 0 until two answers were seen).
	Load          float64 `json:"load"`
	StartedUnixMs int64   `json:"started_unix_ms"`
	// Error says why the member's load is unknown (it did not answer).
	Error string `json:"error,omitempty"`
}

// JobView is one job, running or ended.
type JobView struct {
	ID          string `json:"id"`
	Owner       string `json:"owner"`
	Coordinator string `json:"coordinator"`
	Algorithm   string `json:"algorithm"`
	Rank        int64  `json:"rank"`
	Shards      int64  `json:"shards"`
	Samples     int64  `json:"samples"`
	Features    int64  `json:"features"`
	// State is placing, running, recovering, paused, done, failed or canceled.
	State     string  `json:"state"`
	Iteration int64   `json:"iteration"`
	MaxIter   int64   `json:"max_iter"`
	Seconds   float64 `json:"seconds"`
	RelErr2   float64 `json:"rel_err2"`
	// Rate is iterations a second; ETASeconds the time left at that rate to max_iter (0:
	// unknown).
	Rate       float64 `json:"rate"`
	ETASeconds float64 `json:"eta_seconds"`
	// StopRule is the rule in words; Stop, once ended, why it stopped.
	StopRule string `json:"stop_rule"`
	Stop     string `json:"stop,omitempty"`
	Detached bool   `json:"detached"`
	// OutShared is where a detached job writes its outputs.
	OutShared string `json:"out_shared,omitempty"`
	// ShardNodes is the node (actor address) of each shard, by shard id.
	ShardNodes  []string `json:"shard_nodes,omitempty"`
	Recoveries  int64    `json:"recoveries"`
	Checkpoints int64    `json:"checkpoints"`
	Epoch       uint64   `json:"epoch"`
	// SubmittedUnixMs and EndedUnixMs are when it was submitted and ended (0: running).
	SubmittedUnixMs int64 `json:"submitted_unix_ms"`
	EndedUnixMs     int64 `json:"ended_unix_ms,omitempty"`
	// Error is an ended job's error: kind "user", "canceled" or "failure", the field at
	// fault (the user's) and the message.
	Error *ErrorView `json:"error,omitempty"`
	// Outputs names the outputs Output serves for it (empty: none here).
	Outputs []string `json:"outputs,omitempty"`
	// History, Events and Spec (the job's spec as EncodeSpec shows it: submitted again, the
	// same job) come with one job (Job), not in lists.
	History []PointView    `json:"history,omitempty"`
	Events  []EventView    `json:"events,omitempty"`
	Spec    map[string]any `json:"spec,omitempty"`
}

// PointView is one point of a job's convergence history.
type PointView struct {
	Iteration int64   `json:"iteration"`
	Seconds   float64 `json:"seconds"`
	RelErr2   float64 `json:"rel_err2"`
	// TestRelErr2 is the held-out set's error, when the job has one.
	TestRelErr2 float64 `json:"test_rel_err2,omitempty"`
}

// EventView is one event of a job's timeline.
type EventView struct {
	UnixMs int64 `json:"unix_ms"`
	// Kind is started, checkpoint, failure, recovered, takeover, paused, resumed or ended.
	Kind      string `json:"kind"`
	Iteration int64  `json:"iteration"`
	Text      string `json:"text,omitempty"`
}

// ErrorView is an error as the API answers it, the body of every 4xx and 5xx answer, and an
// ended job's error.
type ErrorView struct {
	// Kind is "user" (the request or spec is the caller's to fix), "auth", "forbidden",
	// "not_found", "method_not_allowed" (with an Allow header), "limit", "canceled" or
	// "failure".
	Kind string `json:"kind"`
	// Field is the spec field at fault (its JSON name), when one is.
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}
