package actors

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/messages"
)

// maxOwnerToken bounds the owner token a submission may carry.
const maxOwnerToken = 128

// JobIDFor returns the id of the job whose owner token is token: a client cannot choose the
// id of a job of its own to be another's (it would need that job's token), so nothing it
// submits can pass for someone else's job anywhere in the cluster.
func JobIDFor(token string) string {
	sum := sha256.Sum256([]byte("didnmf job id\x00" + token))
	return "j" + hex.EncodeToString(sum[:8])
}

// sameToken compares an owner token in constant time; an empty expected token matches
// nothing.
func sameToken(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// owns tells whether the sender of the message ctx handles may act on the job submitted as
// sub: this process and peer nodes may; a client may with the job's owner token, or when the
// guard authenticated it under the owner's name.
func owns(ctx actor.Context, sub *messages.SubmitJob, token string) bool {
	c := callerOf(ctx)
	if c.Peer() {
		return true
	}
	if sameToken(token, sub.GetOwnerToken()) {
		return true
	}
	return sub.GetOwner() != "" && c.Name == sub.GetOwner()
}

// ownerOK tells whether a message about a shard's job carries the job's owner token (or comes
// from a peer); otherwise the node counts it as dropped.
func (n *Node) ownerOK(ctx actor.Context, what, token, want string) bool {
	if callerOf(ctx).Peer() || sameToken(token, want) {
		return true
	}
	n.guard.drop(dropOwnerPrefix+what, 1)
	return false
}

// cancelFor is a host passing on to its coordinator a cancel of the job it checked, with who
// asked (canceler).
type cancelFor struct{ job, by string }

// canceler says who cancels a job, for its error: its owner, a client holding its owner
// token, a node (a peer: an operator's command or a node's HTTP API, which checked who asked),
// or the coordinator's own node.
func canceler(c Caller, sub *messages.SubmitJob) string {
	switch {
	case c.Local():
		return "the coordinator's node"
	case c.Peer() && (c.Name == "" || c.Name == "insecure"):
		return "a remote party (the cluster runs without TLS: not named)"
	case c.Peer():
		return "node " + c.Name
	case sub.GetOwner() != "" && c.Name == sub.GetOwner():
		return "its owner " + c.Name
	}
	return "client " + c.Name + " (holding its owner token)"
}
