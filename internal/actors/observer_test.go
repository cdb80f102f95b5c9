package actors

import (
	"slices"
	"testing"

	"github.com/didnmf/didnmf/messages"
)

// TestDropClassCoversEveryCause: every drop cause the node counts has a class of its own
// among DropClasses, prefixed causes by their prefix; an unknown cause is "other".
func TestDropClassCoversEveryCause(t *testing.T) {
	for _, c := range []struct {
		cause, class string
	}{
		{dropUnauthenticated, "unauthenticated"},
		{dropTypeIndex, "malformed"}, {dropTargetIndex, "malformed"}, {dropSenderIndex, "malformed"},
		{dropSerializer, "malformed"}, {dropUnknownType, "malformed"}, {dropBatchSize, "malformed"},
		{dropDataStream, "malformed"}, {dropDataKind, "malformed"}, {dropDataTarget, "malformed"}, {dropDataMessage, "malformed"},
		{dropClientTarget, "role"}, {dropClientOnly, "role"}, {dropClientOnlyType, "role"}, {dropClientOnlyTo, "role"},
		{dropDataRole, "role"}, {dropRolePrefix + "didnmf.Grant", "role"},
		{dropOwnerPrefix + "CancelJob", "owner"}, {dropStalePrefix + "CheckpointCopy for a shard", "stale"},
		{dropSenderUnproven, "sender_unproven"}, {dropDialRefused, "dial_refused"}, {dropDialIdentity, "dial_refused"},
		{dropRemoteEvicted, "handshake"}, {dropRemoteHandshakeFail, "handshake"}, {dropDataEvicted, "handshake"},
		{dropDataHandshake, "handshake"},
		{dropIdentityConns, "connection_limit"}, {dropPortConns, "connection_limit"}, {dropIdentityStreams, "connection_limit"},
		{dropPanic, "panic"}, {dropUnimplemented, "unimplemented"},
		{dropGossipStreams, "gossip"}, {dropGossipMember + "bad name", "gossip"},
		{"a cause added later", "other"}, {"", "other"},
	} {
		got := DropClass(c.cause)
		if got != c.class {
			t.Errorf("DropClass(%q) = %q, want %q", c.cause, got, c.class)
		}
		if !slices.Contains(DropClasses, got) {
			t.Errorf("DropClass(%q) = %q, not among DropClasses", c.cause, got)
		}
	}
}

// TestJobStateNames: the phases as metrics name them.
func TestJobStateNames(t *testing.T) {
	for p, want := range map[messages.JobPhase]string{messages.JobPhase_JOB_PHASE_PLACING: "placing", messages.JobPhase_JOB_PHASE_RUNNING: "running",
		messages.JobPhase_JOB_PHASE_RECOVERING: "recovering", messages.JobPhase_JOB_PHASE_PAUSED: "paused", messages.JobPhase_JOB_PHASE_DONE: "done",
		messages.JobPhase_JOB_PHASE_FAILED: "failed", messages.JobPhase_JOB_PHASE_CANCELED: "canceled"} {
		if got := JobState(p); got != want {
			t.Errorf("JobState(%v) = %q, want %q", p, got, want)
		}
	}
}
