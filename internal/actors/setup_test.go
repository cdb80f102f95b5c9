package actors

import (
	"errors"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// TestCheckSubmitted is the check a node's host makes of a job submitted to it before it
// starts anything for it: the spec alone, and the nodes it names against the members.
func TestCheckSubmitted(t *testing.T) {
	members := &staticMembers{}
	members.set(cluster.Member{Name: "a", Meta: cluster.Meta{Actor: "10.0.0.1:7000", Role: cluster.RoleMember}})
	for _, c := range []struct {
		name    string
		edit    func(*messages.JobSpec) *messages.JobSpec
		members Members
		field   string // "": accepted
		want    string
	}{
		{"good", func(s *messages.JobSpec) *messages.JobSpec { return s }, members, "", ""},
		{"no spec", func(*messages.JobSpec) *messages.JobSpec { return nil }, nil, "", "no job spec"},
		{"fan-in 3", func(s *messages.JobSpec) *messages.JobSpec { s.FanIn = 3; return s }, nil, "fan-in", "fan-in must be a power of two >= 2, got 3"},
		{"negative alpha", func(s *messages.JobSpec) *messages.JobSpec { s.AlphaCoef = -1; return s }, nil, "alpha_coef",
			"alpha_coef must be a finite number >= 0, got -1"},
		{"detached without out_shared", func(s *messages.JobSpec) *messages.JobSpec { s.Detached = true; return s }, nil, "detached",
			"detached needs out_shared"},
		{"a node not a member", func(s *messages.JobSpec) *messages.JobSpec { s.Nodes = []string{"10.0.0.9:7000"}; return s }, members, "nodes",
			"nodes: 10.0.0.9:7000 is not a member of the cluster"},
		{"nodes without a cluster", func(s *messages.JobSpec) *messages.JobSpec { s.Nodes = []string{"10.0.0.9:7000"}; return s }, nil, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkSubmitted(c.edit(spec("synthetic:m=5,n=40,k=3,seed=1", "did", 3, 2, []string{"10.0.0.1:7000"}, 5)), c.members)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ue *usererr.Error
			if !errors.As(err, &ue) || ue.Field != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v; want the user's fault of field %q with %q", err, c.field, c.want)
			}
		})
	}
}
