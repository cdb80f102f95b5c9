package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
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
}

// flagLeaving is bit 0 of the flags byte; the other bits must be zero.
const flagLeaving = 1

// metaVersion is the first byte of an encoded Meta. A decoder rejects any other version, so a
// change of layout must bump it (all nodes of a cluster run the same build).
const metaVersion = 1

// Encode returns the compact binary form of m: the version byte (1), the role byte, a flags
// byte (bit 0: Leaving), then as minimal unsigned varints len(Actor), the Actor bytes, Cores,
// Memory, Capacity and Started.
// It fails if a field is invalid (see Meta) or the result exceeds memberlist.MetaMaxSize.
func (m Meta) Encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 3+len(m.Actor)+4*binary.MaxVarintLen64)
	var flags byte
	if m.Leaving {
		flags |= flagLeaving
	}
	b = append(b, metaVersion, byte(m.Role), flags)
	b = binary.AppendUvarint(b, uint64(len(m.Actor)))
	b = append(b, m.Actor...)
	b = binary.AppendUvarint(b, uint64(m.Cores))
	b = binary.AppendUvarint(b, uint64(m.Memory))
	b = binary.AppendUvarint(b, uint64(m.Capacity))
	b = binary.AppendUvarint(b, uint64(m.Started))
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("cluster: node meta is %d bytes encoded, more than memberlist's limit of %d (actor address is %d bytes)",
			len(b), memberlist.MetaMaxSize, len(m.Actor))
	}
	return b, nil
}

// DecodeMeta parses the output of Meta.Encode. It returns a descriptive error, and never
// panics, on empty, truncated, oversized or trailing input, an unknown version, non-minimal
// varints, out-of-range numbers or invalid fields; a successful decode re-encodes to b exactly.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, errors.New("cluster: node meta is empty")
	}
	if len(b) > memberlist.MetaMaxSize {
		return m, fmt.Errorf("cluster: node meta is %d bytes, more than the limit of %d", len(b), memberlist.MetaMaxSize)
	}
	if b[0] != metaVersion {
		return m, fmt.Errorf("cluster: node meta has unknown version %d (this build reads version %d; run the same build on every node)", b[0], metaVersion)
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
	n := r.uvarint("actor length")
	if r.err == nil && n > uint64(len(b)-r.off) {
		r.err = fmt.Errorf("cluster: node meta truncated in the actor address (needs %d bytes, %d left)", n, len(b)-r.off)
	}
	if r.err == nil {
		m.Actor = string(b[r.off : r.off+int(n)])
		r.off += int(n)
	}
	m.Cores = r.int("cores")
	m.Memory = r.int64("memory")
	m.Capacity = r.int("capacity")
	m.Started = r.int64("started")
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
	if m.Actor == "" {
		if m.Role == RoleMember {
			return errors.New("cluster: node meta has no actor address: a member must advertise its host:port")
		}
		return nil
	}
	if !utf8.ValidString(m.Actor) {
		return fmt.Errorf("cluster: node meta actor address %q is not valid UTF-8", m.Actor)
	}
	for _, c := range m.Actor {
		if unicode.IsSpace(c) || !unicode.IsPrint(c) {
			return fmt.Errorf("cluster: node meta actor address %q contains a space or control character", m.Actor)
		}
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
