package cluster

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// forgeDead sends to the gossip port at to the packet a holder of the gossip key can make:
// memberlist's dead message about node (incarnation inc, "from" a name of its choosing),
// labelled and encrypted as the cluster's gossip is. Memberlist authenticates a packet by
// the key only, so whoever holds it can say any member is dead.
func forgeDead(t *testing.T, to, node string, inc uint32) {
	t.Helper()
	// deadMsg (5), then the msgpack map {Incarnation, Node, From} as go-msgpack writes it.
	str := func(b *bytes.Buffer, s string) { b.WriteByte(0xa0 | byte(len(s))); b.WriteString(s) }
	var msg bytes.Buffer
	msg.WriteByte(5)
	msg.WriteByte(0x83)
	str(&msg, "Incarnation")
	msg.WriteByte(0xce)
	_ = binary.Write(&msg, binary.BigEndian, inc)
	str(&msg, "Node")
	str(&msg, node)
	str(&msg, "From")
	str(&msg, "forger")
	block, err := aes.NewCipher(testKey)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := append([]byte{1}, nonce...) // encryption version 1, then the nonce
	sealed = gcm.Seal(sealed, nonce, msg.Bytes(), []byte(gossipLabel))
	packet, err := memberlist.AddLabelHeaderToPacket(sealed, gossipLabel)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", to)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(packet); err != nil {
		t.Fatal(err)
	}
}

// TestForgedDeathIsConfirmed is the split brain a holder of the gossip key could still cause
// (a review of issue 30's first fix): memberlist's dead message about a live member, sent to
// another node. Without Config.Confirm the node takes it for a death (and a coordinator on it
// would take the member's jobs over while the member runs them); with Confirm the member,
// which still answers, stays listed, no event is raised, the report is counted, and the
// member refutes it. A member that really died is still declared dead.
func TestForgedDeathIsConfirmed(t *testing.T) {
	for _, tt := range []struct {
		name      string
		confirm   bool
		wantEvent bool
	}{
		{"without confirmation the forged death is believed", false, true},
		{"with confirmation the member stays", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var bAlive atomic.Bool
			bAlive.Store(true)
			var asked atomic.Int64
			cfg := func(name string, port int) Config {
				c := Config{Name: name, SecretKey: testKey, Meta: memberMeta(port)}
				if tt.confirm {
					c.Confirm = func(ctx context.Context, m Member) bool {
						asked.Add(1)
						return m.Name == "b" && bAlive.Load()
					}
				}
				return c
			}
			a := start(t, cfg("a", 9201))
			bc := cfg("b", 9202)
			bc.Join = []string{a.Local().Gossip}
			b := start(t, bc)
			waitFor(t, converge, "a lists b", func() bool { return slices.Contains(names(a.Members()), "b") })

			for inc := uint32(10); inc <= 12; inc++ {
				forgeDead(t, a.Local().Gossip, "b", inc)
			}
			if tt.wantEvent {
				waitFor(t, 5*time.Second, "a believes the forged death", func() bool {
					_, ok := a.rec.find(EventLeave, "b")
					return ok
				})
				return
			}
			waitFor(t, 5*time.Second, "a doubts the forged death", func() bool { return a.Refused()[dropUndoubted] > 0 })
			time.Sleep(2 * time.Second) // long enough for a believed death to show
			if e, ok := a.rec.find(EventLeave, "b"); ok {
				t.Fatalf("a raised %+v for a member that answers", e)
			}
			if !slices.Contains(names(a.Members()), "b") || !slices.Contains(names(a.Workers()), "b") {
				t.Fatalf("a dropped b: members %v", names(a.Members()))
			}
			// b heard of the report and refuted it: a's gossip lists it alive again, and stops
			// asking.
			waitFor(t, 10*time.Second, "b refutes the report", func() bool {
				for _, n := range a.ml.Members() {
					if n.Name == "b" {
						return true
					}
				}
				return false
			})
			// A real death is still one: b stops, Confirm no longer hears it, a raises the leave.
			bAlive.Store(false)
			_ = b.Shutdown()
			waitFor(t, 15*time.Second, "a declares the real death", func() bool {
				e, ok := a.rec.find(EventLeave, "b")
				return ok && e.Dead
			})
			if asked.Load() == 0 {
				t.Fatal("Confirm was never asked")
			}
		})
	}
}
