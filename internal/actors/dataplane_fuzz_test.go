package actors

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/frame"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// FuzzDataPlaneFrames feeds arbitrary streams to a node's data plane as if a peer had sent
// them. It must never panic, and it may deliver a frame only when it is of a known kind,
// addressed to a shard or reducer, and decodes as that kind's message.
func FuzzDataPlaneFrames(f *testing.F) {
	add := func(frames ...[]byte) {
		f.Add(bytes.Join(frames, nil))
	}
	enc := func(kind byte, target string, m proto.Message) []byte {
		body, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return frameOf(f, kind, target, body)
	}
	chunk := chunked.Split([]float64{1, 2, 3}, chunked.Floats)[0]
	add(enc(kindPartial, "host/j0123456789abcdef-e0-r1-0", &messages.Partial{JobId: "j0123456789abcdef", Seq: 1, Chunk: chunk}),
		enc(kindReduced, "host/j0123456789abcdef-s3", &messages.Reduced{JobId: "j0123456789abcdef", Seq: 1, Chunk: chunk}))
	add(enc(7, "host", &messages.Ping{}))
	add([]byte{0xff, 0xff, 0xff, 0x7f, kindPartial, 0})
	node, err := StartNode(NodeConfig{Threads: 1, Insecure: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(node.Close)
	p := node.plane
	who := newParty(pki.RolePeer, "fuzz")
	f.Fuzz(func(t *testing.T, stream []byte) {
		valid := 0
		r := frame.NewReader(bytes.NewReader(stream), maxDataFrame)
		for {
			fr, err := r.Next()
			if err != nil {
				break
			}
			if m := messageOf(fr.Kind); m != nil && dataTargetSpec.MatchString(fr.Target) && proto.Unmarshal(fr.Body, m) == nil {
				valid++
			}
		}
		before := p.delivered.Load()
		p.frames(bytes.NewReader(stream), who, nil)
		if got := p.delivered.Load() - before; got != int64(valid) {
			t.Fatalf("delivered %d frames of a stream with %d valid ones", got, valid)
		}
	})
}
