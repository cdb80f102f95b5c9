package cluster

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
)

// Candidate is a node that may receive shards: usually a worker's Name, Meta.Capacity and
// Meta.Memory.
type Candidate struct {
	// Name identifies the candidate; names must be unique and non-empty.
	Name string
	// Capacity is the placement weight (>= 1): a candidate of capacity 2 gets about twice the
	// shards of one of capacity 1.
	Capacity int
	// Memory is the number of bytes the candidate can hold (>= 0).
	Memory int64
	// Machine, when not empty, names the machine the candidate runs on: candidates on one
	// machine share its memory, the smallest Memory among them (nodes on one machine each
	// offer what the machine has free; together they cannot hold more).
	Machine string
	// Load is the number of shards of other jobs the candidate runs now (>= 0). Place gives the
	// new shards to the least loaded first, as if every candidate's load were spread by
	// capacity (see LoadBound): three one-shard jobs placed in turn on three idle equal
	// members go one to each, where hashing alone would double one up a third of the time
	// and leave another idle. With every Load 0 (and for PlaceRest's kept shards) it changes
	// nothing.
	Load int
}

// CapacityError is returned by Place when some shard fits on no candidate.
type CapacityError struct {
	Job          string // the job being placed
	Shards       int    // number of shards of the job
	Needed       int64  // total bytes of all shards
	LargestShard int64  // bytes of the largest shard
	Members      int    // number of candidates
	Offered      int64  // total bytes offered by the candidates (saturating)
	LargestOffer int64  // the largest single offer
	LargestNode  string // the candidate making it
	Shard        int    // the first shard, in id order, that fit nowhere
}

// Error describes what the job needs against what the cluster offers, in binary byte units.
func (e *CapacityError) Error() string {
	members := "members offer"
	if e.Members == 1 {
		members = "member offers"
	}
	return fmt.Sprintf("job needs %s for %d shards (largest %s); the cluster's %d %s %s (largest %s free on %s): add nodes, raise --memory, or use more shards",
		FormatBytes(e.Needed), e.Shards, FormatBytes(e.LargestShard),
		e.Members, members, FormatBytes(e.Offered), FormatBytes(e.LargestOffer), e.LargestNode)
}

// LoadBound caps the shards a candidate gets at LoadBound times its capacity's share of them,
// rounded down, or at its share rounded up when that is more: pure rendezvous hashing leaves a
// member of three without any of 6 shards a quarter of the time, and a job runs at the pace of
// its most loaded member. The bound keeps that within 25% of an even split (6 shards on 3
// equal members: 2 each), at the price of a few more moves when members come and go (see
// TestPlaceStability). The same factor sets a floor: while there are shards enough, a candidate
// whose share is one shard or more gets at least one, and at least its share divided by
// LoadBound, rounded down (4 shards on 3 equal members: 2, 1 and 1; no member is left idle
// while another holds two).
const LoadBound = 1.25

// loadLimits returns the fewest and the most shards each candidate should get by LoadBound:
// its share of the shards, which is its capacity's share of them when no candidate has a
// Load, and otherwise what fills the candidates up to one level of load per capacity
// (water-filling: a candidate already above that level gets none).
func loadLimits(shards int, candidates []Candidate) (least, most []int) {
	shares := loadShares(shards, candidates)
	least, most = make([]int, len(candidates)), make([]int, len(candidates))
	for i, share := range shares {
		if share == 0 {
			continue // loaded above the level: nothing, unless memory leaves no other choice
		}
		most[i] = max(1, int(math.Ceil(share)), int(math.Floor(LoadBound*share)))
		least[i] = min(int(math.Floor(share)), max(1, int(math.Floor(share/LoadBound))))
	}
	return least, most
}

// loadShares returns each candidate's share of the shards: with level L the load per unit
// of capacity after placing, candidate i's share is max(0, L c_i - Load_i), and the shares
// sum to shards. Shares within 1e-9 of an integer are that integer, so that round-off does
// not move a bound.
func loadShares(shards int, candidates []Candidate) []float64 {
	order := make([]int, len(candidates)) // by load per capacity, increasing
	for i := range order {
		order[i] = i
	}
	perCap := func(i int) float64 { return float64(max(candidates[i].Load, 0)) / float64(candidates[i].Capacity) }
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(perCap(a), perCap(b)) })
	// Raise the level over the candidates in that order until the shards run out.
	// The level is filled/capacity; a share is computed as filled*c/capacity - Load, which
	// without loads is shards*c/total, bit for bit what it was before loads were counted.
	filled, capacity := 0.0, 0.0 // shards and loads of the candidates under the level, their capacity
	for n, i := range order {
		filled += float64(max(candidates[i].Load, 0))
		capacity += float64(candidates[i].Capacity)
		if n+1 == len(order) || (float64(shards)+filled)/capacity <= perCap(order[n+1]) {
			break
		}
	}
	filled += float64(shards)
	shares := make([]float64, len(candidates))
	for i, c := range candidates {
		v := max(0, filled*float64(c.Capacity)/capacity-float64(max(c.Load, 0)))
		if r := math.Round(v); math.Abs(v-r) < 1e-9 {
			v = r
		}
		shares[i] = v
	}
	return shares
}

// Place assigns each shard s (0..len(shardBytes)-1) of job to a candidate by capacity-weighted
// rendezvous (highest random weight) hashing and returns, for each shard, the index of its
// candidate in candidates.
//
// For shard s, candidate c scores -c.Capacity / ln(u), where u in (0,1) comes from a
// well-mixed 64-bit hash of (job, s, c.Name). Shards are taken in id order and each goes to
// the best-scoring candidate (ties broken by name) whose remaining memory still holds
// shardBytes[s] and that has fewer shards than its most by LoadBound (or, when no such
// candidate has the memory, the best-scoring one that has); once the shards left are only
// enough to bring every candidate up to its least by LoadBound, they go to the candidates
// below it. The result depends only on the set of candidates, not their order, and
// adding or removing a candidate moves only the shards that the change forces to move (as
// long as memory does not run short). It needs the same build on every node that must agree
// (floating point is involved).
//
// It returns a *CapacityError when a shard fits nowhere, and an error for no candidates, a
// capacity below 1, negative memory or shard sizes, and empty or duplicate names.
func Place(job string, shardBytes []int64, candidates []Candidate) ([]int, error) {
	return PlaceRest(job, shardBytes, nil, nil, candidates)
}

// PlaceRest is Place for a job some of whose shards already have a candidate: a job recovering
// from the loss of nodes. at[s] >= 0 is the index in candidates of shard s's candidate, which
// it keeps (its memory is already taken off the candidate's, and it counts toward the
// candidate's load bounds); the shards with at[s] < 0 (or all, for a nil at) are placed as
// Place places them, except that prefer[s], when given, lists candidates to try first, in
// order: those holding a copy of the shard's checkpoint, so that it need not be fetched. A
// preferred candidate is taken only within its load bound and memory: a lost node's shards
// spread over the survivors instead of doubling its buddy's load, since a job runs at the pace
// of its most loaded member.
func PlaceRest(job string, shardBytes []int64, at []int, prefer [][]int, candidates []Candidate) ([]int, error) {
	if len(candidates) == 0 {
		return nil, fmt.Errorf("cluster: no members to place the %d shards of job %q on", len(shardBytes), job)
	}
	seen := make(map[string]bool, len(candidates))
	base := make([]uint64, len(candidates))
	// pool[i] is the memory candidate i draws on: its own, or its machine's shared one.
	pool := make([]int, len(candidates))
	remaining := make([]int64, 0, len(candidates))
	machines := map[string]int{}
	for i, c := range candidates {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("cluster: placement candidate %d has no name", i)
		case seen[c.Name]:
			return nil, fmt.Errorf("cluster: placement candidate %q appears twice", c.Name)
		case c.Capacity < 1:
			return nil, fmt.Errorf("cluster: placement candidate %q has capacity %d; it must be >= 1", c.Name, c.Capacity)
		case c.Memory < 0:
			return nil, fmt.Errorf("cluster: placement candidate %q offers negative memory %d", c.Name, c.Memory)
		case c.Load < 0:
			return nil, fmt.Errorf("cluster: placement candidate %q has a negative load %d", c.Name, c.Load)
		}
		seen[c.Name] = true
		base[i] = nameHash(job, c.Name)
		if j, ok := machines[c.Machine]; ok && c.Machine != "" {
			pool[i] = j
			remaining[j] = min(remaining[j], c.Memory)
			continue
		}
		pool[i] = len(remaining)
		remaining = append(remaining, c.Memory)
		if c.Machine != "" {
			machines[c.Machine] = pool[i]
		}
	}
	for s, b := range shardBytes {
		if b < 0 {
			return nil, fmt.Errorf("cluster: shard %d of job %q has negative size %d", s, job, b)
		}
	}

	if at != nil && len(at) != len(shardBytes) || prefer != nil && len(prefer) != len(shardBytes) {
		return nil, fmt.Errorf("cluster: placing job %q: %d shards but %d placements and %d preferences", job, len(shardBytes), len(at), len(prefer))
	}
	// Bounded loads: no candidate takes more than its most, and none is left below its least
	// while shards remain to bring it there.
	least, most := loadLimits(len(shardBytes), candidates)
	count := make([]int, len(candidates))
	out := make([]int, len(shardBytes))
	open := 0 // shards without a candidate
	for s := range shardBytes {
		out[s] = -1
		if at != nil && at[s] >= 0 {
			if at[s] >= len(candidates) {
				return nil, fmt.Errorf("cluster: placing job %q: shard %d kept on candidate %d of %d", job, s, at[s], len(candidates))
			}
			out[s] = at[s]
			count[at[s]]++
			continue
		}
		open++
	}
	deficit := 0
	for i, l := range least {
		deficit += max(l-count[i], 0)
	}
	fits := func(i int, need int64, short bool) bool {
		return remaining[pool[i]] >= need && count[i] < most[i] && (!short || count[i] < least[i])
	}
	for s, need := range shardBytes {
		if out[s] >= 0 {
			continue
		}
		short := deficit >= open // the shards left only fill the floors
		open--
		if prefer != nil {
			if i := slices.IndexFunc(prefer[s], func(i int) bool { return i >= 0 && i < len(candidates) && fits(i, need, short) }); i >= 0 {
				best := prefer[s][i]
				out[s] = best
				remaining[pool[best]] -= need
				if count[best] < least[best] {
					deficit--
				}
				count[best]++
				continue
			}
		}
		sh := mix64(uint64(s) ^ 0x6a09e667f3bcc909)
		best := -1
		// The load bounds give way to memory: a shard that fits only on loaded candidates
		// goes to the best of those.
		for _, bounded := range []bool{true, false} {
			bestScore := 0.0
			for i, c := range candidates {
				if remaining[pool[i]] < need || bounded && !fits(i, need, short) {
					continue
				}
				score := weight(c.Capacity, mix64(base[i]^sh))
				if best < 0 || score > bestScore || score == bestScore && c.Name < candidates[best].Name {
					best, bestScore = i, score
				}
			}
			if best >= 0 {
				break
			}
		}
		if best < 0 {
			return nil, newCapacityError(job, s, shardBytes, candidates)
		}
		out[s] = best
		remaining[pool[best]] -= need
		if count[best] < least[best] {
			deficit--
		}
		count[best]++
	}
	return out, nil
}

// weight is the rendezvous score -capacity/ln(u) with u = (top 53 bits of h + 0.5) / 2^53,
// which lies strictly inside (0, 1).
func weight(capacity int, h uint64) float64 {
	u := (float64(h>>11) + 0.5) / (1 << 53)
	return -float64(capacity) / math.Log(u)
}

// nameHash hashes (job, name) unambiguously (length-prefixed) with FNV-1a, then mixes.
func nameHash(job, name string) uint64 {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(job)))])
	h.Write([]byte(job))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(name)))])
	h.Write([]byte(name))
	return mix64(h.Sum64())
}

// mix64 is the SplitMix64 finalizer, a bijection with full avalanche.
func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func newCapacityError(job string, shard int, shardBytes []int64, candidates []Candidate) *CapacityError {
	e := &CapacityError{Job: job, Shards: len(shardBytes), Members: len(candidates), Shard: shard}
	for _, b := range shardBytes {
		e.Needed = satAdd(e.Needed, b)
		e.LargestShard = max(e.LargestShard, b)
	}
	counted := map[string]bool{}
	for i, c := range candidates {
		if c.Machine == "" || !counted[c.Machine] {
			e.Offered = satAdd(e.Offered, c.Memory) // a machine's shared memory once
			counted[c.Machine] = true
		}
		if i == 0 || c.Memory > e.LargestOffer || c.Memory == e.LargestOffer && c.Name < e.LargestNode {
			e.LargestOffer, e.LargestNode = c.Memory, c.Name
		}
	}
	return e
}

// satAdd adds non-negative a and b, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// FormatBytes renders n bytes in binary units: "512 B", "3.2 GiB", "410 MiB" (one decimal
// below 10, none from 10 up).
func FormatBytes(n int64) string {
	if n < 0 {
		return "-" + FormatBytes(-max(n, -math.MaxInt64))
	}
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	u := -1
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	s := formatUnit(v)
	if s == "1024" && u < len(units)-1 {
		v /= 1024
		u++
		s = formatUnit(v)
	}
	var b strings.Builder
	b.WriteString(s)
	b.WriteByte(' ')
	b.WriteByte(units[u])
	b.WriteString("iB")
	return b.String()
}

func formatUnit(v float64) string {
	if v < 9.95 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
