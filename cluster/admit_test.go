package cluster

import (
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// TestAdmission walks an Admission through its decisions, step by step, with a given clock.
func TestAdmission(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	local := Member{Name: "self", Gossip: "10.0.0.1:7946", Meta: memberMeta(9000)}
	local.Meta.Actor = "10.0.0.1:9000"
	mem := func(name, actor string) Member {
		m := memberMeta(1)
		m.Actor, m.Started = actor, 42
		return Member{Name: name, Gossip: "10.0.0.2:7946", Meta: m}
	}
	b := mem("b", "10.0.0.2:9000")
	listed := map[string]Member{"self": local}
	a := NewAdmission()
	steps := []struct {
		what string
		do   func() string
		want string
	}{
		{"this node itself", func() string { return a.Decide(local, listed, local, t0) }, ""},
		{"a client", func() string {
			c := b
			c.Meta = Meta{Role: RoleClient, Actor: "10.0.0.3:1"}
			return a.Decide(c, listed, local, t0)
		}, RefusedClient},
		{"this node's actor address", func() string { return a.Decide(mem("x", local.Meta.Actor), listed, local, t0) }, RefusedDuplicate},
		{"a new member: queued", func() string { return a.Decide(b, listed, local, t0) }, ProofPending},
		{"again: not queued twice", func() string {
			a.Decide(b, listed, local, t0)
			return strconv.Itoa(len(a.queue))
		}, "1"},
		{"its proof fails", func() string {
			m, ok := a.Next()
			if !ok || m != b {
				return "next: " + m.Name
			}
			a.Failed(ClaimOf(m), t0)
			return a.Decide(b, listed, local, t0.Add(failedFor-time.Second))
		}, RefusedRecent},
		{"tried again after failedFor", func() string { return a.Decide(b, listed, local, t0.Add(failedFor)) }, ProofPending},
		{"proven: admitted", func() string {
			m, _ := a.Next()
			a.Proven(ClaimOf(m), t0)
			a.Finish(ClaimOf(m))
			listed["b"] = b
			return a.Decide(b, listed, local, t0)
		}, ""},
		{"an update of a proven member (leaving)", func() string {
			u := b
			u.Meta.Leaving = true
			return a.Decide(u, listed, local, t0)
		}, ""},
		{"another name at b's actor address", func() string { return a.Decide(mem("twin", b.Meta.Actor), listed, local, t0) }, RefusedDuplicate},
		{"b restarted: a new claim", func() string {
			r := b
			r.Meta.Started++
			return a.Decide(r, listed, local, t0)
		}, ProofPending},
		{"b forgotten: proven again", func() string {
			a.Forget(ClaimOf(b))
			delete(listed, "b")
			return a.Decide(b, listed, local, t0)
		}, ProofPending},
		{"the queue full", func() string {
			for i := len(a.queue); i < maxQueue; i++ {
				a.Decide(mem("q"+strconv.Itoa(i), "10.1.0.1:"+strconv.Itoa(1+i)), listed, local, t0)
			}
			return a.Decide(mem("late", "10.2.0.1:1"), listed, local, t0)
		}, RefusedQueueFull},
		{"the table full", func() string {
			full := map[string]Member{}
			for i := range maxMembers {
				full["m"+strconv.Itoa(i)] = mem("m"+strconv.Itoa(i), "10.3.0.1:"+strconv.Itoa(1+i))
			}
			return a.Decide(mem("more", "10.4.0.1:1"), full, local, t0)
		}, RefusedTableFull},
		{"the counts", func() string {
			r := a.Refused()
			return strconv.FormatInt(r[RefusedClient], 10) + " " + strconv.FormatInt(r[RefusedDuplicate], 10) + " " +
				strconv.FormatInt(r[RefusedProof], 10) + " " + strconv.FormatInt(r[RefusedRecent], 10) + " " +
				strconv.FormatInt(r[RefusedQueueFull], 10) + " " + strconv.FormatInt(r[RefusedTableFull], 10) + " " +
				strconv.Itoa(len(r))
		}, "1 2 1 1 1 1 6"},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("%s: %q, want %q", st.what, got, st.want)
		}
	}
}

// TestLostBounded: the members declared dead that a node keeps trying to rejoin are at most
// maxLost, the most recent ones.
func TestLostBounded(t *testing.T) {
	t.Parallel()
	m := &Membership{table: map[string]Member{}, lost: map[string]lostPeer{}, log: slog.New(slog.DiscardHandler),
		local: Member{Name: "self"}, adm: NewAdmission()}
	enc, err := memberMeta(1).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxLost + 50 {
		n := &memberlist.Node{Name: "n" + strconv.Itoa(i), Addr: net.IPv4(10, 0, byte(i>>8), byte(i)), Port: 7946, Meta: enc}
		m.observe(EventJoin, n)
		m.observe(EventLeave, n)
	}
	if len(m.lost) != maxLost {
		t.Fatalf("%d members to rejoin, want %d", len(m.lost), maxLost)
	}
	if _, ok := m.lost["n0"]; ok {
		t.Error("the oldest death is still kept")
	}
	if _, ok := m.lost["n"+strconv.Itoa(maxLost+49)]; !ok {
		t.Error("the latest death is not kept")
	}
}
