package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// credsOf returns credentials of a role issued by the authority of secret.
func credsOf(t *testing.T, secret []byte, name string, role pki.Role) *pki.Config {
	t.Helper()
	ca, err := pki.CAFromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ca.Credentials(name, []string{"127.0.0.1"}, role)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFrontDoor: a member's gossip port answers a party holding a certificate of the
// cluster (a client's or a peer's) with the view of its workers; a party without one, with
// another cluster's, or speaking plain to a cluster with credentials gets no byte of it: the
// handshake fails and nothing is written. A cluster without credentials answers the plain
// front door, and refuses TLS.
func TestFrontDoor(t *testing.T) {
	key := testKey()
	members := startMembers(t, nil, nil, key, "a", "b")
	addr := members[0].Gossip()
	want := []string{"a", "b"}

	for _, c := range []struct {
		name string
		tls  *pki.Config
	}{
		{"client certificate", credsOf(t, key, "alice", pki.RoleClient)},
		{"peer certificate", credsOf(t, key, "c", pki.RolePeer)},
	} {
		d := &doorClient{tls: c.tls}
		view, err := d.fetch(context.Background(), addr)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var names []string
		for _, m := range view {
			names = append(names, m.Name)
			if m.Meta.Role != cluster.RoleMember || m.Meta.Actor == "" || m.Meta.Capacity < 1 || m.Meta.Started == 0 {
				t.Errorf("%s: view lists %+v", c.name, m)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("%s: view lists %v, want %v", c.name, names, want)
		}
	}

	// The view carries the member's own entry, as its membership advertises it, and the
	// peer certificate of its name.
	v, leaf, err := fetchView(context.Background(), credsOf(t, key, "c", pki.RolePeer), addr)
	if err != nil {
		t.Fatal(err)
	}
	if v.Self == nil || *v.Self != members[0].Members.Local() || leaf.Subject.CommonName != "a" {
		t.Errorf("self %+v (certificate of %q), want %+v", v.Self, leaf.Subject.CommonName, members[0].Members.Local())
	}

	// No certificate, another cluster's: the member writes nothing after the handshake.
	other := credsOf(t, testKey(), "alice", pki.RoleClient)
	for _, c := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no certificate", nil},
		{"another cluster's client certificate", other.Client.Certificates},
	} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, Certificates: c.certs, MinVersion: tls.VersionTLS13})
		herr := tc.Handshake()
		got, rerr := io.ReadAll(tc)
		conn.Close()
		if len(got) > 0 || (herr == nil && rerr == nil) {
			t.Errorf("%s: the member wrote %d bytes (handshake %v, read %v)", c.name, len(got), herr, rerr)
		}
		t.Logf("%s: handshake %v, read %v", c.name, herr, rerr)
		// And the client's own fetch says the authentication failed.
		d := &doorClient{tls: credsOf(t, testKey(), "alice", pki.RoleClient)}
		if _, err := d.fetch(context.Background(), addr); !errors.As(err, new(*AuthError)) {
			t.Errorf("another cluster's credentials: %v, want an *AuthError", err)
		}
	}

	// Plain to a cluster with credentials: closed at once, nothing written.
	if _, err := (&doorClient{}).fetch(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "closed the connection") {
		t.Errorf("a plain fetch from a cluster with credentials: %v", err)
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write([]byte{cluster.FrontDoorPlain})
	if got, _ := io.ReadAll(conn); len(got) > 0 {
		t.Errorf("the plain front door of a cluster with credentials wrote %d bytes", len(got))
	}
	conn.Close()

	// A cluster without credentials: the plain front door answers, TLS is refused.
	s, err := Start(Config{Name: "open", Bind: "127.0.0.1:0", Insecure: true, Node: actors.NodeConfig{DataDir: filepath.Join(t.TempDir(), "open"), Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	view, err := (&doorClient{}).fetch(context.Background(), s.Gossip())
	if err != nil || len(view) != 1 || view[0].Name != "open" || view[0].Meta.Actor != s.Node.Address() {
		t.Errorf("plain fetch from a cluster without credentials: %v, %v", view, err)
	}
	if _, err := (&doorClient{tls: credsOf(t, key, "alice", pki.RoleClient)}).fetch(context.Background(), s.Gossip()); err == nil {
		t.Error("a TLS fetch from a cluster without credentials answered")
	}
}

// TestFetchChecksTheMember: a client refuses a front door whose certificate is not a peer's
// (a client's, of the same cluster) or not for the address it dialled.
func TestFetchChecksTheMember(t *testing.T) {
	key := testKey()
	for _, c := range []struct {
		name  string
		serve *pki.Config
	}{
		{"a client certificate", credsOf(t, key, "mallory", pki.RoleClient)},
		{"a peer certificate for another host", func() *pki.Config {
			ca, _ := pki.CAFromSecret(key)
			cfg, err := ca.Credentials("b", []string{"10.9.9.9"}, pki.RolePeer)
			if err != nil {
				t.Fatal(err)
			}
			return cfg
		}()},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan bool, 1)
		go func() {
			conn, err := l.Accept()
			if err != nil {
				wrote <- false
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			var b [1]byte
			_, _ = io.ReadFull(conn, b[:])
			tc := tls.Server(&prefixConn{Conn: conn, r: io.MultiReader(bytes.NewReader(b[:]), conn)}, c.serve.Server)
			if tc.Handshake() != nil {
				wrote <- false
				return
			}
			view, _ := encodeView([]cluster.Member{{Name: "x", Gossip: "127.0.0.1:1", Meta: cluster.Meta{Role: cluster.RoleMember, Actor: "127.0.0.1:2", Capacity: 1}}}, nil)
			_, err = tc.Write(view)
			wrote <- err == nil
		}()
		d := &doorClient{tls: credsOf(t, key, "alice", pki.RoleClient)}
		_, err = d.fetch(context.Background(), l.Addr().String())
		l.Close()
		if !errors.As(err, new(*AuthError)) {
			t.Errorf("%s: %v, want an *AuthError", c.name, err)
		}
		t.Logf("%s: %v", c.name, err)
		<-wrote
	}
}

// TestLateSelf: until its membership is stored (while cluster.Start runs, when the members
// it joins prove it), a node's front door says of itself the name and Meta it gives
// cluster.Start, with the address the connection came in on; after, its membership's Local.
// A node whose name is left to cluster.Start (no credentials) says nothing until then.
func TestLateSelf(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	meta := cluster.Meta{Role: cluster.RoleMember, Actor: "127.0.0.1:9", Capacity: 2, Started: 42}
	late := &lateMembers{name: "n", meta: meta}
	if got, ok := late.Self(conn); !ok || got != (cluster.Member{Name: "n", Gossip: l.Addr().String(), Meta: meta}) {
		t.Errorf("before the membership: %+v, %v", got, ok)
	}
	if got, ok := (&lateMembers{meta: meta}).Self(conn); ok {
		t.Errorf("no name yet: %+v", got)
	}
	s := startMembers(t, nil, nil, testKey(), "m")[0]
	late.m.Store(s.Members)
	if got, ok := late.Self(conn); !ok || got != s.Members.Local() {
		t.Errorf("after: %+v, %v; want %+v", got, ok, s.Members.Local())
	}
}

// viewBytes encodes a view of members for the decoder's tests (without the length).
func viewBytes(t testing.TB, ms ...*messages.ViewMember) []byte {
	b, err := proto.Marshal(&messages.ClusterView{Members: ms})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// selfViewBytes encodes a view whose self is self, of members.
func selfViewBytes(t testing.TB, self *messages.ViewMember, ms ...*messages.ViewMember) []byte {
	b, err := proto.Marshal(&messages.ClusterView{Self: self, Members: ms})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// selfUnknown encodes a view whose self has a field this build does not know.
func selfUnknown(t testing.TB) []byte {
	self := goodMember("a", 7000)
	self.ProtoReflect().SetUnknown([]byte{0xf8, 0x07, 0x01}) // field 127, varint 1
	return selfViewBytes(t, self)
}

func goodMember(name string, port int) *messages.ViewMember {
	return &messages.ViewMember{Name: name, Gossip: "127.0.0.1:" + strconv.Itoa(port), Actor: "127.0.0.1:" + strconv.Itoa(port+1),
		Cores: 4, Memory: 1 << 30, Capacity: 1, Started: 12345}
}

// TestDecodeView: the view decoder takes a well-formed view and refuses oversized, garbage
// and malformed ones, saying what is wrong.
func TestDecodeView(t *testing.T) {
	with := func(f func(m *messages.ViewMember)) *messages.ViewMember {
		m := goodMember("a", 7000)
		f(m)
		return m
	}
	good := viewBytes(t, goodMember("a", 7000), goodMember("b", 7010))
	v, err := decodeView(good)
	if ms := v.Members; err != nil || len(ms) != 2 || ms[1].Name != "b" || ms[1].Meta.Actor != "127.0.0.1:7011" || ms[1].Meta.Memory != 1<<30 || v.Self != nil {
		t.Fatalf("a good view without self (an older build's): %+v, %v", v, err)
	}
	// With self: checked as a member is, and it may be leaving (its members may not).
	leavingSelf := with(func(m *messages.ViewMember) { m.Leaving = true })
	v, err = decodeView(selfViewBytes(t, leavingSelf, goodMember("b", 7010)))
	if err != nil || len(v.Members) != 1 || v.Self == nil || v.Self.Name != "a" || v.Self.Meta.Started != 12345 || !v.Self.Meta.Leaving ||
		v.Self.Meta.Actor != "127.0.0.1:7001" || v.Self.Gossip != "127.0.0.1:7000" || v.Self.Meta.Role != cluster.RoleMember {
		t.Fatalf("a good view with a leaving self: %+v, %v", v, err)
	}
	// Self is listed among the members too, as a worker: no "twice" between them.
	if v, err = decodeView(selfViewBytes(t, goodMember("a", 7000), goodMember("a", 7000), goodMember("b", 7010))); err != nil || v.Self == nil || len(v.Members) != 2 {
		t.Fatalf("a view whose self is among its members: %+v, %v", v, err)
	}
	// A member's version and HTTP URL come through; "" is a build's from before them.
	versioned := with(func(m *messages.ViewMember) { m.Version, m.Http = "v0.4.0", "https://127.0.0.1:8265" })
	if v, err = decodeView(viewBytes(t, versioned, goodMember("b", 7010))); err != nil || v.Members[0].Meta.Version != "v0.4.0" ||
		v.Members[0].Meta.HTTP != "https://127.0.0.1:8265" || v.Members[1].Meta.Version != "" || v.Members[1].Meta.HTTP != "" {
		t.Fatalf("a view with a version and an HTTP URL: %+v, %v", v, err)
	}
	many := make([]*messages.ViewMember, maxViewMembers+1)
	for i := range many {
		many[i] = goodMember("n"+strconv.Itoa(i), 2000+2*i)
	}
	unknown := append(slices.Clone(good), 0xf8, 0x07, 0x01) // field 127, varint 1
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"garbage", []byte("\xff\xff\xff\xff garbage"), "not a ClusterView"},
		{"unknown field", unknown, "does not know"},
		{"too many members", viewBytes(t, many...), "more than"},
		{"no name", viewBytes(t, with(func(m *messages.ViewMember) { m.Name = "" })), "no name"},
		{"control character in the name", viewBytes(t, with(func(m *messages.ViewMember) { m.Name = "a\nb" })), "control character"},
		{"long name", viewBytes(t, with(func(m *messages.ViewMember) { m.Name = strings.Repeat("x", 300) })), "more than 255"},
		{"gossip host name", viewBytes(t, with(func(m *messages.ViewMember) { m.Gossip = "evil.example:7000" })), "not an IP"},
		{"gossip port 0", viewBytes(t, with(func(m *messages.ViewMember) { m.Gossip = "127.0.0.1:0" })), "port in 1..65535"},
		{"no actor", viewBytes(t, with(func(m *messages.ViewMember) { m.Actor = "" })), "no actor address"},
		{"actor without port", viewBytes(t, with(func(m *messages.ViewMember) { m.Actor = "127.0.0.1" })), "not host:port"},
		{"capacity 0", viewBytes(t, with(func(m *messages.ViewMember) { m.Capacity = 0 })), "capacity"},
		{"negative memory", viewBytes(t, with(func(m *messages.ViewMember) { m.Memory = -1 })), "negative"},
		{"huge cores", viewBytes(t, with(func(m *messages.ViewMember) { m.Cores = 1 << 40 })), "out of range"},
		{"a name twice", viewBytes(t, goodMember("a", 7000), goodMember("a", 7010)), "name a twice"},
		{"an actor twice", viewBytes(t, goodMember("a", 7000), with(func(m *messages.ViewMember) { m.Name, m.Gossip = "b", "127.0.0.1:7100" })), "actor 127.0.0.1:7001 twice"},
		{"a leaving member", viewBytes(t, goodMember("b", 7010), leavingSelf), "a is leaving"},
		{"self without a name", selfViewBytes(t, with(func(m *messages.ViewMember) { m.Name = "" }), goodMember("b", 7010)), "self: no name"},
		{"self's gossip a host name", selfViewBytes(t, with(func(m *messages.ViewMember) { m.Gossip = "evil.example:7000" })), "self: a: gossip address"},
		{"self without actor", selfViewBytes(t, with(func(m *messages.ViewMember) { m.Actor = "" })), "self: a: cluster: node meta has no actor address"},
		{"self's capacity 0", selfViewBytes(t, with(func(m *messages.ViewMember) { m.Capacity = 0 })), "self: a: cluster: node meta capacity 0"},
		{"self's negative start", selfViewBytes(t, with(func(m *messages.ViewMember) { m.Started = -1 })), "self: a:"},
		{"self with an unknown field", selfUnknown(t), "self: fields this build does not know"},
		{"version with a newline", viewBytes(t, with(func(m *messages.ViewMember) { m.Version = "v1\n" })), "a: cluster: node meta version"},
		{"long version", viewBytes(t, with(func(m *messages.ViewMember) { m.Version = strings.Repeat("v", 65) })), "more than 64"},
		{"javascript URL", viewBytes(t, with(func(m *messages.ViewMember) { m.Http = "javascript:alert(1)" })), "scheme must be http or https"},
		{"self's URL with a path", selfViewBytes(t, with(func(m *messages.ViewMember) { m.Http = "https://h:1/evil" })), "self: a: cluster: node meta HTTP URL"},
	} {
		if ms, err := decodeView(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, %v; want an error saying %q", c.name, ms, err, c.want)
		}
	}
	// The length before the view is bounded, and checked before anything is read.
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"oversized", binary.BigEndian.AppendUint32(nil, maxViewBytes+1), "more than"},
		{"cut short", append(binary.BigEndian.AppendUint32(nil, uint32(len(good))), good[:len(good)-1]...), "cut short"},
		{"a TLS alert", []byte{0x15, 3, 3, 0, 2, 2, 40}, "answers in TLS"},
		{"empty", nil, "EOF"},
	} {
		if ms, err := readView(bytes.NewReader(c.b)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, %v; want an error saying %q", c.name, ms, err, c.want)
		}
	}
	v, err = readView(bytes.NewReader(append(binary.BigEndian.AppendUint32(nil, uint32(len(good))), good...)))
	if err != nil || len(v.Members) != 2 {
		t.Errorf("a good answer: %+v, %v", v, err)
	}
}

// FuzzDecodeView: the view decoder never panics, and a view it accepts encodes back to one
// it decodes to the same members.
func FuzzDecodeView(f *testing.F) {
	f.Add(viewBytes(f, goodMember("a", 7000), goodMember("b", 7010)))
	f.Add(viewBytes(f))
	f.Add([]byte("\x0a\x03\x0a\x01a"))
	f.Add(selfViewBytes(f, goodMember("a", 7000), goodMember("a", 7000), goodMember("b", 7010)))
	versioned := goodMember("c", 7020)
	versioned.Version, versioned.Http = "v0.4.0", "https://[::1]:8265"
	f.Add(viewBytes(f, goodMember("a", 7000), versioned))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeView(b)
		if err != nil {
			return
		}
		enc, err := encodeView(v.Members, v.Self)
		if err != nil {
			t.Fatalf("an accepted view does not encode: %v", err)
		}
		again, err := readView(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("an accepted view, encoded again, is refused: %v", err)
		}
		if !slices.Equal(v.Members, again.Members) || (v.Self == nil) != (again.Self == nil) || (v.Self != nil && *v.Self != *again.Self) {
			t.Fatalf("decode, encode, decode: %+v then %+v", v, again)
		}
	})
}

// TestGone: a member is gone from a view when the next lists no instance of it with the same
// name, start time and actor address: a restarted member (new start time) is gone, and comes
// back as a new one.
func TestGone(t *testing.T) {
	m := func(name string, started int64, actor string) cluster.Member {
		return cluster.Member{Name: name, Gossip: "127.0.0.1:1", Meta: cluster.Meta{Role: cluster.RoleMember, Actor: actor, Capacity: 1, Started: started}}
	}
	a, b := m("a", 1, "127.0.0.1:10"), m("b", 1, "127.0.0.1:20")
	for _, c := range []struct {
		name      string
		old, next []cluster.Member
		want      []string
	}{
		{"same", []cluster.Member{a, b}, []cluster.Member{b, a}, nil},
		{"b left", []cluster.Member{a, b}, []cluster.Member{a}, []string{"b"}},
		{"b restarted", []cluster.Member{a, b}, []cluster.Member{a, m("b", 2, "127.0.0.1:20")}, []string{"b"}},
		{"b moved", []cluster.Member{a, b}, []cluster.Member{a, m("b", 1, "127.0.0.1:21")}, []string{"b"}},
		{"nothing answers", []cluster.Member{a, b}, nil, []string{"a", "b"}},
		{"c joined", []cluster.Member{a}, []cluster.Member{a, m("c", 1, "127.0.0.1:30")}, nil},
	} {
		var got []string
		for _, g := range gone(c.old, c.next) {
			got = append(got, g.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: gone %v, want %v", c.name, got, c.want)
		}
	}
}
