// Package bugs names the deliberate bugs that the simulator's bite test
// (jobctl/jobsim's TestSimulatorFindsPlantedBugs) plants in the control's state machines, to
// prove that its schedules and invariants find each one: a simulator that passes with a bug
// planted proves nothing about the code without it.
//
// A machine takes the set of bugs to plant in its configuration; production code leaves it
// empty, and every check costs one test of a bit.
package bugs

import (
	"fmt"
	"strings"
)

// Set is a set of planted bugs (0: none).
type Set uint64

// The bugs. Each names the decision it breaks.
const (
	// WholeScatter: a reducer hands every child the whole result of a reduce-scatter instead
	// of the child's own segments.
	WholeScatter Set = 1 << iota
	// SequentialSum: a reducer adds its children's partials left to right instead of in the
	// reduce tree's canonical order (kernels.TreeSum): the bits then depend on the fan-in.
	SequentialSum
	// DuplicateCounts: a reducer takes a duplicated chunk as another child's contribution.
	DuplicateCounts
	// EarlyCommit: the coordinator commits a checkpoint when the first shard reports it
	// written, not when every shard has.
	EarlyCommit
	// TakeoverKeepsEpoch: a coordinator that takes a job over goes on in its predecessor's
	// epoch instead of a new generation's.
	TakeoverKeepsEpoch
	// KeepOneTooFew: a coordinator's commit tells the nodes to keep one committed checkpoint
	// fewer than it may fall back to (KeepFrom one commit too late).
	KeepOneTooFew
	// StaleAssignment: a shard's driver takes an assignment of an earlier epoch than the one it
	// serves (a superseded coordinator's) instead of answering that it is superseded. The
	// host fences such an assignment off before it reaches the driver, so the bite test plants
	// this bug with HostStaleAssignment.
	StaleAssignment
	// ReportBeforeBuddy: a shard's driver reports a checkpoint to the coordinator once written
	// on its node, before its buddy has answered that it keeps a copy.
	ReportBeforeBuddy
	// ResumeWithoutHistory: a shard's driver that resumes from a checkpoint starts its stop
	// rule afresh instead of from the history saved in the checkpoint.
	ResumeWithoutHistory
	// PastGrant: a shard's driver runs on past the last iteration the coordinator granted.
	PastGrant
	// LeaseKeepsFirstCoordinator: a client goes on renewing its job's lease with the
	// coordinator it first followed after another took the job over: it misses the new
	// coordinator's lease, which runs out.
	LeaseKeepsFirstCoordinator
	// HostStaleAssignment: a node's host takes a shard assignment of an earlier epoch than the
	// job's latest there, or of another coordinator (a superseded one's), instead of answering
	// that it is superseded: its epoch fence is gone.
	HostStaleAssignment
	// ForgetReservation: a node's host does not give back the memory a shard reserved when
	// the shard stops.
	ForgetReservation

	end // the first bit no bug uses
)

var names = map[Set]string{
	WholeScatter:               "send the whole reduce-scatter result",
	SequentialSum:              "sum children left to right",
	DuplicateCounts:            "count a duplicated chunk as a contribution",
	EarlyCommit:                "commit a checkpoint on its first shard",
	TakeoverKeepsEpoch:         "take over in the predecessor's epoch",
	KeepOneTooFew:              "keep one checkpoint too few",
	StaleAssignment:            "accept a stale assignment",
	ReportBeforeBuddy:          "report a checkpoint before its buddy keeps it",
	ResumeWithoutHistory:       "resume without the stop rule's history",
	PastGrant:                  "run past the grant",
	LeaseKeepsFirstCoordinator: "miss the lease of a takeover's coordinator",
	HostStaleAssignment:        "accept a stale assignment at the host",
	ForgetReservation:          "forget a reservation",
}

// All lists every bug, in the order of their bits.
func All() []Set {
	var out []Set
	for b := Set(1); b < end; b <<= 1 {
		out = append(out, b)
	}
	return out
}

// Has tells whether s plants b.
func (s Set) Has(b Set) bool { return s&b != 0 }

// String names the bugs of s.
func (s Set) String() string {
	if s == 0 {
		return "none"
	}
	var out []string
	for _, b := range All() {
		if s.Has(b) {
			out = append(out, names[b])
		}
	}
	if rest := s &^ (end - 1); rest != 0 {
		out = append(out, fmt.Sprintf("bits %#x", uint64(rest)))
	}
	return strings.Join(out, ", ")
}
