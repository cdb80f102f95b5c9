// Package evict is the rule of a node's bounded tables of what parties hold (login sessions,
// kept outputs, ended jobs' records), as package slots has it for connections: when a table
// is full, the entry to drop is the oldest of the owner holding the most, so that one party
// filling a table pushes out only its own entries, and a party holding few keeps them.
package evict

import "iter"

// Entry is one entry of a table: its key, its owner, and when it was made (any ordering of
// int64: smaller is older).
type Entry[K, O comparable] struct {
	Key   K
	Owner O
	At    int64
}

// Choose returns the key of the entry to drop from a full table: the oldest entry of the owner
// holding the most, the newcomer's owner counted one more when newcomer is not nil (of two
// owners holding as many, the one whose oldest entry is older; of entries as old, the one
// less orders first, when less is given). It returns false for an empty table.
func Choose[K, O comparable](entries iter.Seq[Entry[K, O]], newcomer *O, less func(a, b K) bool) (K, bool) {
	type held struct {
		n      int
		oldest Entry[K, O]
		any    bool
	}
	older := func(a, b Entry[K, O]) bool {
		return a.At < b.At || a.At == b.At && less != nil && less(a.Key, b.Key)
	}
	byOwner := map[O]*held{}
	if newcomer != nil {
		byOwner[*newcomer] = &held{n: 1}
	}
	for e := range entries {
		h := byOwner[e.Owner]
		if h == nil {
			h = &held{}
			byOwner[e.Owner] = h
		}
		h.n++
		if !h.any || older(e, h.oldest) {
			h.oldest, h.any = e, true
		}
	}
	var most *held
	for _, h := range byOwner {
		if !h.any {
			continue // the newcomer's owner holds nothing here
		}
		if most == nil || h.n > most.n || h.n == most.n && older(h.oldest, most.oldest) {
			most = h
		}
	}
	if most == nil {
		var none K
		return none, false
	}
	return most.oldest.Key, true
}
