package actors

import (
	"io"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// FuzzGuardFilter feeds arbitrary bytes to the guard as a remote message from a client and
// from a peer, on a member's node and on a client's. It must never panic, and every envelope it lets through must be one protoactor
// can take without panicking: indices within the batch's tables, a protobuf payload of a type
// the role may send that decodes or fails cleanly.
func FuzzGuardFilter(f *testing.F) {
	ping, _ := proto.Marshal(&messages.Ping{Nonce: 3})
	add := func(b *remote.MessageBatch) {
		data, err := proto.Marshal(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	add(&remote.MessageBatch{TypeNames: []string{"didnmf.Ping"}, Targets: []string{"host"},
		Envelopes: []*remote.MessageEnvelope{{MessageData: ping}}})
	add(&remote.MessageBatch{TypeNames: []string{"didnmf.Ping", "didnmf.StopJob"}, Targets: []string{"host", "host/j-s1"},
		Senders:   []*actor.PID{{Address: "127.0.0.1:1", Id: "x"}},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 1, Target: 1, Sender: 1, MessageData: ping}, {TypeId: 9, Target: -1, Sender: 7}}})
	add(&remote.MessageBatch{TypeNames: []string{"actor.PoisonPill"}, Targets: []string{"host"},
		Envelopes: []*remote.MessageEnvelope{{SerializerId: 1, MessageData: []byte("{}")}}})
	// A job spec with enum values no enum defines, and a string where an older peer put the
	// algorithm (field 4, reserved since the enums).
	spec, _ := proto.Marshal(&messages.JobSpec{Inputs: []string{"x.npy"}, Algorithm: 99, Layout: -1, Ingest: 7, Rank: 2, Shards: 1})
	spec = protowire.AppendString(protowire.AppendTag(spec, 4, protowire.BytesType), "did")
	submit := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), spec)
	failed, _ := proto.Marshal(&messages.ActorFailed{JobId: "j", Actor: "j-s1", Role: 42, Shard: -1})
	add(&remote.MessageBatch{TypeNames: []string{"didnmf.SubmitJob", "didnmf.ActorFailed"}, Targets: []string{"host"},
		Envelopes: []*remote.MessageEnvelope{{MessageData: submit}, {TypeId: 1, MessageData: failed}}})
	add(&remote.MessageBatch{TypeNames: []string{"didnmf.Progress", "didnmf.SubmitJob"}, Targets: []string{"client$1", "future$2", "host"},
		Envelopes: []*remote.MessageEnvelope{{MessageData: ping}, {Target: 1}, {TypeId: 1, Target: 2}}})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	member, client := newGuard(false, logger), newGuard(false, logger)
	client.clientOnly = true
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range []struct {
			g   *guard
			who party
		}{{member, newParty(pki.RoleClient, "c")}, {member, newParty(pki.RolePeer, "p")},
			{client, newParty(pki.RoleClient, "c")}, {client, newParty(pki.RolePeer, "p")}} {
			g, who := c.g, c.who
			var m remote.RemoteMessage
			if proto.Unmarshal(data, &m) != nil {
				return
			}
			b := m.GetMessageBatch()
			if b == nil {
				return
			}
			g.filter(b, who)
			if g.clientOnly {
				for _, e := range b.Envelopes {
					if who.role != pki.RolePeer || !clientBound[b.TypeNames[e.TypeId]] || !clientNodeTarget.MatchString(b.Targets[e.Target]) {
						t.Fatalf("a client's node let %s from a %s to %q through", b.TypeNames[e.TypeId], who.role, b.Targets[e.Target])
					}
				}
			}
			for _, e := range b.Envelopes {
				if e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames) || e.Target < 0 || int(e.Target) >= len(b.Targets) ||
					e.Sender < 0 || int(e.Sender) > len(b.Senders) {
					t.Fatalf("let through an envelope with indices out of range: %v", e)
				}
				name := b.TypeNames[e.TypeId]
				if allowed, ok := access[name]; !ok || !allowed.allow(who.role) && !g.clientOnly {
					t.Fatalf("let %s through from a %s", name, who.role)
				}
				if e.MessageHeader.GetHeaderData()[headerRole] != who.role.String() {
					t.Fatalf("envelope not stamped with the sender's role: %v", e.MessageHeader)
				}
				_, _ = remote.Deserialize(e.MessageData, name, e.SerializerId)
			}
		}
	})
}
