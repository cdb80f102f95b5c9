package cluster

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		meta Meta
	}{
		{"member", Meta{Role: RoleMember, Actor: "10.0.0.7:8090", Cores: 2, Memory: 4 << 30, Capacity: 1, Started: 1_700_000_000_123_456_789}},
		{"client without actor", Meta{Role: RoleClient}},
		{"client with actor", Meta{Role: RoleClient, Actor: "localhost:1", Capacity: 0}},
		{"ipv6 actor", Meta{Role: RoleMember, Actor: "[::1]:65535", Cores: 128, Memory: 1, Capacity: 7}},
		{"maxima", Meta{Role: RoleMember, Actor: "h:9", Cores: math.MaxInt, Memory: math.MaxInt64, Capacity: math.MaxInt, Started: math.MaxInt64}},
		{"long host", Meta{Role: RoleMember, Actor: strings.Repeat("a", 400) + ":1", Capacity: 1}},
		{"leaving", Meta{Role: RoleMember, Actor: "n:2", Capacity: 4, Started: 5, Leaving: true}},
		{"version", Meta{Role: RoleMember, Actor: "n:2", Capacity: 1, Version: "v0.4.0"}},
		{"http", Meta{Role: RoleMember, Actor: "n:2", Capacity: 1, HTTP: "https://10.0.0.5:8265"}},
		{"version and http", Meta{Role: RoleMember, Actor: "10.0.0.5:7947", Cores: 8, Memory: 1 << 30, Capacity: 1, Started: 9,
			Version: "(devel)", HTTP: "http://127.0.0.1:8265", Leaving: true}},
		{"http ipv6 and slash", Meta{Role: RoleMember, Actor: "[::1]:2", Capacity: 1, HTTP: "https://[::1]:8265/"}},
		{"http host name without port", Meta{Role: RoleMember, Actor: "n:2", Capacity: 1, HTTP: "https://didnmf-0.didnmf.default.svc"}},
		{"longest version and http", Meta{Role: RoleMember, Actor: "n:2", Capacity: 1,
			Version: strings.Repeat("v", MaxVersionBytes), HTTP: "https://" + strings.Repeat("h", MaxHTTPBytes-len("https://:1")) + ":1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.meta.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			// Canonical: version 1 (what older builds read) unless there is a version or URL to carry.
			want := byte(metaVersion1)
			if tt.meta.Version != "" || tt.meta.HTTP != "" {
				want = metaVersion2
			}
			if b[0] != want {
				t.Errorf("first byte %d, want version %d", b[0], want)
			}
			if len(b) > memberlist.MetaMaxSize {
				t.Errorf("encoded %d bytes > %d", len(b), memberlist.MetaMaxSize)
			}
			got, err := DecodeMeta(b)
			if err != nil {
				t.Fatalf("DecodeMeta: %v", err)
			}
			if got != tt.meta {
				t.Errorf("round trip: got %+v, want %+v", got, tt.meta)
			}
		})
	}
}

// TestDecodeMetaVersion1: a meta as the builds before version 2 encoded it (these bytes were
// written by one) decodes, with Version and HTTP empty, and encodes back to the same bytes:
// a new node reads an old one.
func TestDecodeMetaVersion1(t *testing.T) {
	t.Parallel()
	old, err := hex.DecodeString("0101010d31302e302e302e373a3830393002808080801001959a97ece39fe7cb17")
	if err != nil {
		t.Fatal(err)
	}
	want := Meta{Role: RoleMember, Actor: "10.0.0.7:8090", Cores: 2, Memory: 4 << 30, Capacity: 1, Started: 1_700_000_000_123_456_789, Leaving: true}
	got, err := DecodeMeta(old)
	if err != nil || got != want {
		t.Fatalf("DecodeMeta(version 1) = %+v, %v; want %+v", got, err, want)
	}
	again, err := got.Encode()
	if err != nil || !bytes.Equal(again, old) {
		t.Errorf("re-encoded as %x, %v; want the version 1 bytes %x", again, err, old)
	}
	// The same meta with a version is version 2: the version 1 bytes, then the two strings.
	got.Version = "v1"
	v2, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	wantV2 := append(append([]byte{metaVersion2}, old[1:]...), 2, 'v', '1', 0)
	if !bytes.Equal(v2, wantV2) {
		t.Errorf("with Version v1: %x, want %x", v2, wantV2)
	}
}

func TestMetaSizeLimit(t *testing.T) {
	t.Parallel()
	// Fixed part for this meta: version, role, flags, 2-byte actor length, ":1" and four 1-byte
	// varints.
	const fixed = 1 + 1 + 1 + 2 + 2 + 4
	tests := []struct {
		hostLen int
		ok      bool
	}{
		{memberlist.MetaMaxSize - fixed, true},
		{memberlist.MetaMaxSize - fixed + 1, false},
		{1000, false},
	}
	for _, tt := range tests {
		m := Meta{Role: RoleMember, Actor: strings.Repeat("h", tt.hostLen) + ":1", Capacity: 1}
		b, err := m.Encode()
		if tt.ok {
			if err != nil || len(b) != memberlist.MetaMaxSize {
				t.Errorf("host of %d bytes: got %d bytes, err %v; want exactly %d bytes", tt.hostLen, len(b), err, memberlist.MetaMaxSize)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "512") {
			t.Errorf("host of %d bytes: err %v, want an error naming the 512-byte limit", tt.hostLen, err)
		}
	}
}

func TestMetaInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		meta Meta
		want string
	}{
		{"zero", Meta{}, "role 0"},
		{"unknown role", Meta{Role: 3, Actor: "a:1", Capacity: 1}, "role 3"},
		{"member capacity 0", Meta{Role: RoleMember, Actor: "a:1"}, "capacity"},
		{"client negative capacity", Meta{Role: RoleClient, Capacity: -1}, "capacity"},
		{"negative cores", Meta{Role: RoleMember, Actor: "a:1", Capacity: 1, Cores: -1}, "cores"},
		{"negative memory", Meta{Role: RoleMember, Actor: "a:1", Capacity: 1, Memory: -1}, "memory"},
		{"negative started", Meta{Role: RoleMember, Actor: "a:1", Capacity: 1, Started: -1}, "start"},
		{"member without actor", Meta{Role: RoleMember, Capacity: 1}, "actor"},
		{"actor without port", Meta{Role: RoleMember, Actor: "host", Capacity: 1}, "host:port"},
		{"actor without host", Meta{Role: RoleMember, Actor: ":80", Capacity: 1}, "no host"},
		{"actor port 0", Meta{Role: RoleMember, Actor: "h:0", Capacity: 1}, "port"},
		{"actor port too big", Meta{Role: RoleMember, Actor: "h:65536", Capacity: 1}, "port"},
		{"actor with space", Meta{Role: RoleClient, Actor: "h :1"}, "space"},
		{"actor not utf-8", Meta{Role: RoleClient, Actor: "h\xff:1"}, "UTF-8"},
		{"version too long", Meta{Role: RoleClient, Version: strings.Repeat("v", MaxVersionBytes+1)}, "version is 65 bytes"},
		{"version with space", Meta{Role: RoleClient, Version: "v1 beta"}, "space"},
		{"version with newline", Meta{Role: RoleClient, Version: "v1\n"}, "control"},
		{"version not utf-8", Meta{Role: RoleClient, Version: "v\xff"}, "UTF-8"},
		{"http too long", Meta{Role: RoleClient, HTTP: "https://" + strings.Repeat("h", MaxHTTPBytes)}, "more than 128"},
		{"http javascript", Meta{Role: RoleClient, HTTP: "javascript:alert(1)"}, "scheme"},
		{"http ftp", Meta{Role: RoleClient, HTTP: "ftp://h:1"}, "scheme"},
		{"http no scheme", Meta{Role: RoleClient, HTTP: "10.0.0.5:8265"}, "HTTP URL"},
		{"http no host", Meta{Role: RoleClient, HTTP: "https://"}, "no host"},
		{"http port only", Meta{Role: RoleClient, HTTP: "https://:8265"}, "no host"},
		{"http user", Meta{Role: RoleClient, HTTP: "https://u:p@h:1"}, "more than"},
		{"http path", Meta{Role: RoleClient, HTTP: "https://h:1/x"}, "more than"},
		{"http query", Meta{Role: RoleClient, HTTP: "https://h:1?a=b"}, "more than"},
		{"http empty query", Meta{Role: RoleClient, HTTP: "https://h:1?"}, "more than"},
		{"http fragment", Meta{Role: RoleClient, HTTP: "https://h:1#x"}, "more than"},
		{"http port 0", Meta{Role: RoleClient, HTTP: "https://h:0"}, "port"},
		{"http port too big", Meta{Role: RoleClient, HTTP: "https://h:65536"}, "port"},
		{"http empty port", Meta{Role: RoleClient, HTTP: "https://h:"}, "port"},
		{"http space", Meta{Role: RoleClient, HTTP: "https://h :1"}, "space"},
	}
	for _, tt := range tests {
		_, err := tt.meta.Encode()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Encode error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}

func TestDecodeMetaGarbage(t *testing.T) {
	t.Parallel()
	good, err := Meta{Role: RoleMember, Actor: "n1:7000", Cores: 300, Memory: 1 << 40, Capacity: 2, Started: 42}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"nil", nil, "empty"},
		{"version only", []byte{1}, "truncated"},
		{"no flags", []byte{1, 2}, "truncated"},
		{"unknown version", append([]byte{3}, good[1:]...), "unknown version 3"},
		{"version 2 without the strings", append([]byte{2}, good[1:]...), "truncated in the version length"},
		{"version 2 carrying nothing", append(append([]byte{2}, good[1:]...), 0, 0), "not canonical"},
		{"version 2 truncated in the version", append(append([]byte{2}, good[1:]...), 5, 'v'), "truncated in the version"},
		{"version 2 without the URL", append(append([]byte{2}, good[1:]...), 1, 'v'), "truncated in the HTTP URL length"},
		{"version 2 truncated in the URL", append(append([]byte{2}, good[1:]...), 0, 9, 'h'), "truncated in the HTTP URL"},
		{"version 2 trailing byte", append(append([]byte{2}, good[1:]...), 1, 'v', 0, 0), "trailing"},
		{"version 2 bad URL", append(append([]byte{2}, good[1:]...), 0, 8, 'f', 't', 'p', ':', '/', '/', 'h', 'h'), "scheme"},
		{"version 2 version with newline", append(append([]byte{2}, good[1:]...), 2, 'v', '\n', 0), "control"},
		{"version zero", []byte{0, 1, 0}, "unknown version 0"},
		{"unknown flag", []byte{1, 2, 2, 0, 0, 0, 0, 0}, "unknown flags 0x02"},
		{"truncated actor", good[:6], "truncated in the actor"},
		{"truncated varint", good[:len(good)-1], "truncated"},
		{"trailing byte", append(bytes.Clone(good), 0), "trailing"},
		{"non-minimal varint", []byte{1, 2, 0, 0x80, 0x00, 0, 0, 0, 0}, "non-minimal"},
		{"overflowing varint", append([]byte{1, 2, 0, 0}, bytes.Repeat([]byte{0xff}, 11)...), "overflow"},
		{"memory out of range", append([]byte{1, 2, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0), "memory"},
		{"role byte bad", []byte{1, 9, 0, 0, 0, 0, 0, 0}, "role 9"},
		{"too long", append([]byte{1}, make([]byte, memberlist.MetaMaxSize)...), "more than the limit"},
		{"ascii junk", []byte("hello, world"), "unknown version"},
	}
	for _, tt := range tests {
		m, err := DecodeMeta(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: DecodeMeta(%x) = %+v, %v; want an error mentioning %q", tt.name, tt.in, m, err, tt.want)
		}
	}
}

// FuzzDecodeMeta: whatever decodes is valid and canonical, whatever does not leaves the Meta
// zero, and nothing panics. The seeds are here and in testdata/fuzz/FuzzDecodeMeta (a version 1
// meta written by a build from before version 2, and version 2 metas, good and bad).
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{
		{Role: RoleMember, Actor: "10.0.0.7:8090", Cores: 2, Memory: 4 << 30, Capacity: 1, Started: 1_700_000_000_123_456_789},
		{Role: RoleClient},
		{Role: RoleMember, Actor: "[::1]:1", Cores: math.MaxInt, Memory: math.MaxInt64, Capacity: 3, Started: math.MaxInt64, Leaving: true},
		{Role: RoleMember, Actor: "10.0.0.7:8090", Cores: 2, Memory: 4 << 30, Capacity: 1, Started: 1, Version: "v0.4.0", HTTP: "https://10.0.0.7:8265"},
		{Role: RoleMember, Actor: "h:1", Capacity: 1, Version: "(devel)"},
		{Role: RoleClient, HTTP: "http://[::1]:8265/"},
	} {
		b, err := m.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 0xff})
	f.Add([]byte{1, 2, 3, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 1, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{2, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 2, 0, 0, 0, 0, 0, 0, 1, 'v', 0})
	f.Add([]byte{3, 2, 0, 0, 0, 0, 0, 0, 1, 'v', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMeta(b)
		if err != nil {
			if m != (Meta{}) {
				t.Fatalf("DecodeMeta(%x) returned %+v along with error %v", b, m, err)
			}
			return
		}
		// Whatever decodes is valid and canonical: it encodes back to the same bytes.
		again, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded %+v from %x but Encode fails: %v", m, b, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("DecodeMeta(%x) = %+v re-encodes as %x", b, m, again)
		}
	})
}
