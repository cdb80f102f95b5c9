package cluster

import (
	"slices"
	"strings"
	"time"
)

// State is how this node sees a member: alive, suspect, dead or left.
type State string

// The states of a known member (Known).
const (
	// StateAlive: a listed member the gossip holds for alive.
	StateAlive State = "alive"
	// StateSuspect: a listed member the gossip reports gone while this node has not acted
	// on the report yet (Config.Confirm still asks it whether it answers). Memberlist does
	// not tell its own suspicions (a probe that failed, not yet a death) to its delegates,
	// so a member under such a suspicion still shows alive.
	StateSuspect State = "suspect"
	// StateDead: a member declared dead (it failed, or was replaced by a restart).
	StateDead State = "dead"
	// StateLeft: a member that left gracefully (Leave).
	StateLeft State = "left"
)

// KnownMember is a member as Known lists it: its state and since when this node has known
// it so (for alive members: since they joined or came back).
type KnownMember struct {
	Member
	State State
	Since time.Time
}

// goneFor and maxGone bound the members gone (dead or left) that Known still lists: those
// gone in the last goneFor, at most maxGone, the most recent ones.
const (
	goneFor = rejoinFor
	maxGone = maxLost
)

// goneMember is a member gone from the table: as it was last known, whether it died, and when.
type goneMember struct {
	mem  Member
	dead bool
	at   time.Time
}

// Known returns every node this one knows of, sorted by name: the listed members (Members)
// alive or suspect, and those gone (dead or left) in the last ten minutes, at most 256 of
// them, each as it was last known. A node that comes back is listed once, by its new state.
func (m *Membership) Known() []KnownMember {
	reported := map[string]bool{} // the nodes memberlist holds for alive or suspect
	for _, n := range m.ml.Members() {
		reported[n.Name] = true
	}
	now := time.Now()
	m.mu.Lock()
	out := make([]KnownMember, 0, len(m.table)+len(m.gone))
	for name, mem := range m.table {
		st := StateAlive
		if _, doubted := m.doubted[name]; doubted || (!reported[name] && name != m.local.Name) {
			st = StateSuspect
		}
		out = append(out, KnownMember{Member: mem, State: st, Since: m.since[name]})
	}
	for name, g := range m.gone {
		if now.Sub(g.at) > goneFor {
			delete(m.gone, name)
			continue
		}
		if _, listed := m.table[name]; listed {
			continue
		}
		st := StateLeft
		if g.dead {
			st = StateDead
		}
		out = append(out, KnownMember{Member: g.mem, State: st, Since: g.at})
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b KnownMember) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// noteGone records a member gone from the table (under mu).
func (m *Membership) noteGone(mem Member, dead bool, at time.Time) {
	delete(m.since, mem.Name)
	if m.gone == nil {
		m.gone = map[string]goneMember{}
	}
	if _, ok := m.gone[mem.Name]; !ok && len(m.gone) >= maxGone {
		var oldest string
		var when time.Time
		for name, g := range m.gone {
			if oldest == "" || g.at.Before(when) {
				oldest, when = name, g.at
			}
		}
		delete(m.gone, oldest)
	}
	m.gone[mem.Name] = goneMember{mem: mem, dead: dead, at: at}
}

// noteListed records a member (re)entering the table (under mu).
func (m *Membership) noteListed(name string, at time.Time) {
	delete(m.gone, name)
	if m.since == nil {
		m.since = map[string]time.Time{}
	}
	m.since[name] = at
}
