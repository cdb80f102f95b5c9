package pki

import (
	"crypto/x509"
	"slices"
	"strings"
)

// Role is what a certificate lets its holder do in a cluster. Every certificate names one in
// its subject's organizational unit; a certificate without one (made before roles existed) is
// a peer's.
type Role uint8

const (
	// RolePeer is a member node: it may send every message of the protocol.
	RolePeer Role = iota + 1
	// RoleClient submits jobs and may list, watch, cancel and fetch only its own.
	RoleClient
)

// Organizational units that carry the role in a certificate's subject.
const (
	unitPeer   = "didnmf-peer"
	unitClient = "didnmf-client"
)

func (r Role) unit() string {
	if r == RoleClient {
		return unitClient
	}
	return unitPeer
}

// String returns "peer" or "client".
func (r Role) String() string {
	switch r {
	case RolePeer:
		return "peer"
	case RoleClient:
		return "client"
	}
	return "none"
}

// RoleOf returns the role a certificate grants.
func RoleOf(cert *x509.Certificate) Role {
	if slices.Contains(cert.Subject.OrganizationalUnit, unitClient) {
		return RoleClient
	}
	return RolePeer
}

// Owner names that are no client's: a job's owner is the name of who submitted it, and these
// name submitters that hold no client certificate. LocalOwner owns the jobs a node's own
// process submits without naming an owner; OperatorOwner those the HTTP operator submits
// with its token or session.
const (
	LocalOwner    = "local"
	OperatorOwner = "operator"
)

// ReservedClientName reports whether name (compared without case) is one no client may act
// under, a client certificate's common name or an HTTP client token's name: a client named
// so would share those owners' quotas and see, and cancel, their jobs.
func ReservedClientName(name string) bool {
	return strings.EqualFold(name, LocalOwner) || strings.EqualFold(name, OperatorOwner)
}
