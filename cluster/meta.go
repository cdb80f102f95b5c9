package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
)

// Role says what a node does in the cluster.
type Role uint8

const (
	// RoleMember is a worker: it runs shards and takes part in placement.
	RoleMember Role = 1
	// RoleClient was the role of clients when they gossiped; clients no longer do, and a
	// membership refuses a claim of this role (it stays in the encoding so that one is read,
	// and refused, rather than taken for garbage).
	RoleClient Role = 2
)

// String returns "member", "client" or "role(N)" for an unknown value.
func (r Role) String() string {
	switch r {
	case RoleMember:
		return "member"
	case RoleClient:
		return "client"
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// Meta is what a node advertises in its memberlist node meta. Its encoding (see Encode) must
// stay within memberlist.MetaMaxSize (512) bytes.
type Meta struct {
	// Role is RoleMember or RoleClient.
	Role Role
	// Actor is the host:port of the node's actor (gRPC) endpoint; required for a member,
	// optional for a client.
	Actor string
	// Cores is the number of cores the node offers (>= 0).
	Cores int
	// Memory is the number of bytes the node offers for job data (>= 0).
	Memory int64
	// Capacity is the node's placement weight: >= 1 for a member, >= 0 for a client.
	Capacity int
	// Started is when the node started, in unix nanoseconds (>= 0). A node restarted under
	// the same name advertises a new value, which lets the others tell it from the old one.
	Started int64
	// Leaving is set by Membership.Leave just before the node leaves: a leaving member is no
	// longer among the Workers, and its disappearance is reported as a graceful leave rather
	// than a death. (Memberlist itself does not tell its event delegate which of the two
	// happened.)
	Leaving bool
	// Version is the node's build version as `didnmf --version` names it (e.g. "v0.4.0" or
	// "(devel)"): at most MaxVersionBytes, printable UTF-8 without spaces; "" when unknown
	// (a node of a build from before it was advertised). Members of one cluster that
	// advertise different versions are shown as such (status, the dashboard).
	Version string
	// HTTP is the base URL of the node's HTTP service (serve --http), "http://" or
	// "https://" with a host and an optional port and nothing else (no user, path beyond
	// "/", query or fragment), e.g. "https://10.0.0.5:8265"; at most MaxHTTPBytes; "" when it
	// serves none. Other members' pages link to it, so it is checked as strictly as a link
	// one would follow.
	HTTP string
}

// Bounds of Meta's strings.
const (
	// MaxVersionBytes bounds Meta.Version.
	MaxVersionBytes = 64
	// MaxHTTPBytes bounds Meta.HTTP.
	MaxHTTPBytes = 128
)

// flagLeaving is bit 0 of the flags byte; the other bits must be zero.
const flagLeaving = 1

// The first byte of an encoded Meta is its layout's version. Version 1 has no Version and
// HTTP; version 2 appends them. A decoder rejects any other version, so a change of layout
// must bump it.
const (
	metaVersion1 = 1
	metaVersion2 = 2
	// metaVersion is the newest layout, the one this build writes when there is a Version
	// or an HTTP to carry.
	metaVersion = metaVersion2
)

// Encode returns the compact binary form of m: the version byte, the role byte, a flags byte
// (bit 0: Leaving), then as minimal unsigned varints len(Actor), the Actor bytes, Cores,
// Memory, Capacity and Started; in version 2, then len(Version), the Version bytes, len(HTTP)
// and the HTTP bytes. The encoding is canonical: it is version 1 (the layout builds from
// before version 2 read, byte for byte) when Version and HTTP are both empty, else version 2.
// It fails if a field is invalid (see Meta) or the result exceeds memberlist.MetaMaxSize.
func (m Meta) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 3+len(m.Actor)+len(m.Version)+len(m.HTTP)+6*binary.MaxVarintLen64)
	var flags byte
	if m.Leaving {
		flags |= flagLeaving
	}
	version := byte(metaVersion1)
	if m.Version != "" || m.HTTP != "" {
		version = metaVersion2
	}
	b = append(b, version, byte(m.Role), flags)
	b = binary.AppendUvarint(b, uint64(len(m.Actor)))
	b = append(b, m.Actor...)
	b = binary.AppendUvarint(b, uint64(m.Cores))
	b = binary.AppendUvarint(b, uint64(m.Memory))
	b = binary.AppendUvarint(b, uint64(m.Capacity))
	b = binary.AppendUvarint(b, uint64(m.Started))
	if version == metaVersion2 {
		b = binary.AppendUvarint(b, uint64(len(m.Version)))
		b = append(b, m.Version...)
		b = binary.AppendUvarint(b, uint64(len(m.HTTP)))
		b = append(b, m.HTTP...)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: node meta is %d bytes encoded, more than memberlist's limit of %d (actor address is %d bytes, version %d, HTTP URL %d)",
			len(b), memberlist.MetaMaxSize, len(m.Actor), len(m.Version), len(m.HTTP))
	}
	return b, nil
}

// DecodeMeta parses the output of Meta.Encode, of either version (a version 1 meta, from a
// build from before version 2, has Version and HTTP ""). It returns a descriptive error, and
// never panics, on empty, truncated, oversized or trailing input, an unknown version, non-minimal
// varints, out-of-range numbers, invalid fields or a version 2 meta that carries neither
// Version nor HTTP (not canonical); a successful decode re-encodes to b exactly.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, errors.New("cluster: node meta is empty")
	}
	if len(b) > memberlist.MetaMaxSize {
		return m, fmt.Errorf("cluster: node meta is %d bytes, more than the limit of %d", len(b), memberlist.MetaMaxSize)
	}
	version := b[0]
	if version != metaVersion1 && version != metaVersion2 {
		return m, fmt.Errorf("cluster: node meta has unknown version %d (this build reads versions 1 and 2; run the same build on every node)", b[0])
	}
	if len(b) < 3 {
		return m, errors.New("cluster: node meta truncated before the role and flags")
	}
	m.Role = Role(b[1])
	if b[2]&^flagLeaving != 0 {
		return Meta{}, fmt.Errorf("cluster: node meta has unknown flags %#02x", b[2])
	}
	m.Leaving = b[2]&flagLeaving != 0
	r := metaReader{b: b, off: 3}
	m.Actor = r.string("the actor address")
	m.Cores = r.int("cores")
	m.Memory = r.int64("memory")
	m.Capacity = r.int("capacity")
	m.Started = r.int64("started")
	if version == metaVersion2 {
		m.Version = r.string("the version")
		m.HTTP = r.string("the HTTP URL")
		if r.err == nil && m.Version == "" && m.HTTP == "" {
			r.err = errors.New("cluster: node meta of version 2 carries neither a version nor an HTTP URL (not canonical: that is version 1)")
		}
	}
	if r.err != nil {
		return Meta{}, r.err
	}
	if r.off != len(b) {
		return Meta{}, fmt.Errorf("cluster: node meta has %d trailing bytes", len(b)-r.off)
	}
	if err := m.validate(); err != nil {
		return Meta{}, err
	}
	return m, nil
}

// metaReader reads minimal uvarints from b, keeping the first error.
type metaReader struct {
	b   []byte
	off int
	err error
}

func (r *metaReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.err = fmt.Errorf("cluster: node meta truncated in %s", field)
		return 0
	case n < 0:
		r.err = fmt.Errorf("cluster: node meta has an overflowing varint in %s", field)
		return 0
	case n != varintLen(v):
		r.err = fmt.Errorf("cluster: node meta has a non-minimal varint in %s", field)
		return 0
	}
	r.off += n
	return v
}

// string reads a length (a uvarint) and that many bytes.
func (r *metaReader) string(field string) string {
	n := r.uvarint(field + " length")
	if r.err == nil && n > uint64(len(r.b)-r.off) {
		r.err = fmt.Errorf("cluster: node meta truncated in %s (needs %d bytes, %d left)", field, n, len(r.b)-r.off)
	}
	if r.err != nil {
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}

func (r *metaReader) int64(field string) int64 {
	v := r.uvarint(field)
	if r.err == nil && v > math.MaxInt64 {
		r.err = fmt.Errorf("cluster: node meta %s %d is out of range", field, v)
		return 0
	}
	return int64(v)
}

func (r *metaReader) int(field string) int {
	v := r.uvarint(field)
	if r.err == nil && v > math.MaxInt {
		r.err = fmt.Errorf("cluster: node meta %s %d is out of range", field, v)
		return 0
	}
	return int(v)
}

func varintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// validate checks the field rules documented on Meta.
func (m Meta) validate() error {
	switch m.Role {
	case RoleMember, RoleClient:
	default:
		return fmt.Errorf("cluster: node meta role %d is neither RoleMember (1) nor RoleClient (2)", m.Role)
	}
	if m.Cores < 0 {
		return fmt.Errorf("cluster: node meta cores %d is negative", m.Cores)
	}
	if m.Memory < 0 {
		return fmt.Errorf("cluster: node meta memory %d is negative", m.Memory)
	}
	if m.Started < 0 {
		return fmt.Errorf("cluster: node meta start time %d is negative", m.Started)
	}
	if m.Role == RoleMember && m.Capacity < 1 {
		return fmt.Errorf("cluster: node meta capacity %d: a member needs a capacity >= 1", m.Capacity)
	}
	if m.Capacity < 0 {
		return fmt.Errorf("cluster: node meta capacity %d is negative", m.Capacity)
	}
	if err := validVersion(m.Version); err != nil {
		return err
	}
	if err := validHTTP(m.HTTP); err != nil {
		return err
	}
	if m.Actor == "" {
		if m.Role == RoleMember {
			return errors.New("cluster: node meta has no actor address: a member must advertise its host:port")
		}
		return nil
	}
	if err := printable("actor address", m.Actor); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(m.Actor)
	if err != nil {
		return fmt.Errorf("cluster: node meta actor address %q is not host:port: %v", m.Actor, err)
	}
	if host == "" {
		return fmt.Errorf("cluster: node meta actor address %q has no host", m.Actor)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 || strconv.FormatUint(p, 10) != port {
		return fmt.Errorf("cluster: node meta actor address %q needs a port in 1..65535", m.Actor)
	}
	return nil
}

// printable checks that s is valid UTF-8 without spaces or control characters.
func printable(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("cluster: node meta %s %q is not valid UTF-8", what, s)
	}
	for _, c := range s {
		if unicode.IsSpace(c) || !unicode.IsPrint(c) {
			return fmt.Errorf("cluster: node meta %s %q contains a space or control character", what, s)
		}
	}
	return nil
}

// validVersion checks Meta.Version's rules.
func validVersion(v string) error {
	if len(v) > MaxVersionBytes {
		return fmt.Errorf("cluster: node meta version is %d bytes, more than %d", len(v), MaxVersionBytes)
	}
	return printable("version", v)
}

// validHTTP checks Meta.HTTP's rules.
func validHTTP(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxHTTPBytes {
		return fmt.Errorf("cluster: node meta HTTP URL is %d bytes, more than %d", len(s), MaxHTTPBytes)
	}
	if err := printable("HTTP URL", s); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("cluster: node meta HTTP URL %q: %v", s, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("cluster: node meta HTTP URL %q: the scheme must be http or https", s)
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("cluster: node meta HTTP URL %q has no host", s)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("cluster: node meta HTTP URL %q is more than scheme://host[:port]", s)
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 || strconv.FormatUint(n, 10) != p {
			return fmt.Errorf("cluster: node meta HTTP URL %q needs a port in 1..65535", s)
		}
	}
	return nil
}
