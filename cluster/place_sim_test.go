package cluster

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// placeSchedules is how many seeded placement schedules TestPlaceSimulation runs; -place.seed
// replays one.
var (
	placeSchedules = flag.Int("place.schedules", 20000, "schedules of TestPlaceSimulation")
	placeSeed      = flag.Uint64("place.seed", 0, "replay this schedule of TestPlaceSimulation (0: all)")
)

// simCluster is a random cluster of one placement schedule: candidates of capacities 1-3 on
// machines that may host several, each with memory from scarce to ample.
type simCluster struct {
	cands []Candidate
	need  []int64
}

func newSimCluster(rng *rand.Rand) simCluster {
	n := 1 + rng.IntN(24)
	machines := 1 + rng.IntN(n)
	var c simCluster
	for i := 0; i < n; i++ {
		m := Candidate{Name: fmt.Sprintf("n%02d", i), Capacity: 1 + rng.IntN(3), Memory: int64(rng.IntN(64)) * mib}
		if rng.IntN(3) > 0 {
			m.Machine = fmt.Sprintf("m%d", rng.IntN(machines))
		}
		if rng.IntN(4) == 0 {
			m.Memory = 1 << 50 // ample
		}
		c.cands = append(c.cands, m)
	}
	shards := 1 + rng.IntN(3*n+10)
	for s := 0; s < shards; s++ {
		c.need = append(c.need, int64(1+rng.IntN(4))*mib)
	}
	return c
}

// checkPlacement checks the invariants of a placement: every shard on a candidate, the kept
// shards where they were, no memory pool over its offer, and the load bounds held whenever
// memory did not force a shard past them (all memory ample).
func checkPlacement(out, kept []int, need []int64, cands []Candidate) error {
	if len(out) != len(need) {
		return fmt.Errorf("%d placements for %d shards", len(out), len(need))
	}
	used := map[string]int64{}
	offer := map[string]int64{}
	key := func(i int) string {
		if cands[i].Machine != "" {
			return "machine " + cands[i].Machine
		}
		return "node " + cands[i].Name
	}
	for i, c := range cands {
		if o, ok := offer[key(i)]; !ok || c.Memory < o {
			offer[key(i)] = c.Memory
		}
	}
	count := make([]int, len(cands))
	ample := true
	for _, c := range cands {
		ample = ample && c.Memory >= 1<<50
	}
	for s, i := range out {
		if i < 0 || i >= len(cands) {
			return fmt.Errorf("shard %d on candidate %d of %d", s, i, len(cands))
		}
		if kept != nil && kept[s] >= 0 && kept[s] != i {
			return fmt.Errorf("kept shard %d moved from %d to %d", s, kept[s], i)
		}
		count[i]++
		if kept == nil || kept[s] < 0 {
			used[key(i)] += need[s]
		}
	}
	for k, u := range used {
		if u > offer[k] {
			return fmt.Errorf("%s holds %d bytes of new shards, offers %d", k, u, offer[k])
		}
	}
	if ample {
		least, most := loadLimits(len(need), cands)
		keptOn := make([]int, len(cands))
		for _, k := range kept {
			if k >= 0 {
				keptOn[k]++
			}
		}
		for i := range cands {
			if count[i] > max(most[i], keptOn[i]) {
				return fmt.Errorf("%s holds %d shards, bound %d", cands[i].Name, count[i], most[i])
			}
			if kept == nil && count[i] < least[i] {
				return fmt.Errorf("%s holds %d shards, floor %d", cands[i].Name, count[i], least[i])
			}
		}
	}
	return nil
}

// TestPlaceSimulation runs seeded schedules of a job's life: placed on a random cluster, then
// nodes lost one after another, each loss followed by PlaceRest of the lost shards on the
// survivors (preferring a random copy holder). After every step the invariants of
// checkPlacement hold, the first placement is the same when the candidates come in another
// order, a lost shard passes over its copy holder only for a floor, a bound or memory, and a
// refusal is a CapacityError naming one of the job's shards. A failing schedule prints its
// seed: go test ./cluster -run TestPlaceSimulation -place.seed N replays it;
// -place.schedules N runs more (300,000 take about 20 s).
func TestPlaceSimulation(t *testing.T) {
	schedules := *placeSchedules
	if testing.Short() {
		schedules = min(schedules, 300)
	}
	first, last := uint64(1), uint64(schedules)
	if *placeSeed != 0 {
		first, last = *placeSeed, *placeSeed
	}
	steps, refused := 0, 0
	for seed := first; seed <= last; seed++ {
		if err := placeSchedule(seed, &steps, &refused); err != nil {
			t.Fatalf("schedule %d: %v (replay: go test ./cluster -run TestPlaceSimulation -place.seed %d)", seed, err, seed)
		}
	}
	t.Logf("%d schedules, %d placements, %d refused for want of memory", last-first+1, steps, refused)
}

// placeSchedule runs one schedule.
func placeSchedule(seed uint64, steps, refused *int) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	c := newSimCluster(rng)
	job := fmt.Sprintf("job-%d", seed)
	out, err := Place(job, c.need, c.cands)
	*steps++
	if err != nil {
		*refused++
		return refusalHonest(err, c.need, c.cands)
	}
	if err := checkPlacement(out, nil, c.need, c.cands); err != nil {
		return fmt.Errorf("first placement: %v", err)
	}
	if err := orderIndependent(job, c.need, nil, nil, c.cands, out, rng); err != nil {
		return err
	}
	cands := c.cands
	// Nodes are lost one after another; the kept shards' bytes are off the free memory the
	// survivors announce, so each step places only the lost shards in what is left.
	for len(cands) > 1 {
		lost := rng.IntN(len(cands))
		alive := slices.Delete(slices.Clone(cands), lost, lost+1)
		kept := make([]int, len(out))
		prefer := make([][]int, len(out))
		for s, i := range out {
			switch {
			case i == lost:
				kept[s] = -1
				prefer[s] = []int{rng.IntN(len(alive))}
			case i > lost:
				kept[s] = i - 1
			default:
				kept[s] = i
			}
		}
		next, err := PlaceRest(job, c.need, kept, prefer, alive)
		*steps++
		if err != nil {
			*refused++
			return refusalHonest(err, c.need, alive)
		}
		if err := checkPlacement(next, kept, c.need, alive); err != nil {
			return fmt.Errorf("after losing %s: %v", cands[lost].Name, err)
		}
		// Floors come first: while a survivor is below its least, the lost shards may go to it
		// instead of their copy holder. Without that pressure a holder is passed over only for
		// its bound or its memory.
		least, _ := loadLimits(len(c.need), alive)
		floors := false
		for i := range alive {
			n := 0
			for _, k := range kept {
				if k == i {
					n++
				}
			}
			floors = floors || n < least[i]
		}
		for s := range next {
			if !floors && kept[s] < 0 && prefer[s][0] != next[s] {
				_, most := loadLimits(len(c.need), alive)
				h := prefer[s][0]
				n := 0
				for _, i := range next[:s] {
					if i == h {
						n++
					}
				}
				for _, i := range kept[s+1:] {
					if i == h {
						n++
					}
				}
				pool := alive[h].Memory
				for _, o := range alive {
					if o.Machine != "" && o.Machine == alive[h].Machine {
						pool = min(pool, o.Memory)
					}
				}
				if n < most[h] && pool >= 1<<50 {
					return fmt.Errorf("after losing %s: shard %d passed over its copy holder %s (%d shards, bound %d; kept %v, prefer %v, placed %v)", cands[lost].Name, s, alive[h].Name, n, most[h], kept, prefer, next)
				}
			}
		}
		cands, out = alive, next
	}
	return nil
}

// refusalHonest checks that a refusal is a CapacityError naming one of the job's shards.
func refusalHonest(err error, need []int64, cands []Candidate) error {
	var ce *CapacityError
	if !asCapacity(err, &ce) {
		return fmt.Errorf("refused without a CapacityError: %v", err)
	}
	if ce.Shard < 0 || ce.Shard >= len(need) {
		return fmt.Errorf("CapacityError names shard %d of %d", ce.Shard, len(need))
	}
	return nil
}

func asCapacity(err error, ce **CapacityError) bool {
	c, ok := err.(*CapacityError)
	*ce = c
	return ok
}

// orderIndependent checks that the candidates' order does not change the assignment.
func orderIndependent(job string, need []int64, kept []int, prefer [][]int, cands []Candidate, want []int, rng *rand.Rand) error {
	perm := rng.Perm(len(cands))
	shuffled := make([]Candidate, len(cands))
	for i, p := range perm {
		shuffled[p] = cands[i]
	}
	got, err := Place(job, need, shuffled)
	if err != nil {
		return fmt.Errorf("shuffled candidates: %v", err)
	}
	for s := range want {
		if shuffled[got[s]].Name != cands[want[s]].Name {
			return fmt.Errorf("shard %d goes to %s, or to %s when the candidates come in another order", s, cands[want[s]].Name, shuffled[got[s]].Name)
		}
	}
	return nil
}

// TestPlaceAtScale plans past this machine: a job of 10,000 shards on 1,000 nodes in 20 racks
// of 50, then a rack lost. It reports the decision times, the shards moved and the heaviest
// node, and holds the invariants.
func TestPlaceAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("places 10,000 shards on 1,000 nodes")
	}
	const nodes, racks, shards = 1000, 20, 10000
	cands := make([]Candidate, nodes)
	for i := range cands {
		cands[i] = Candidate{Name: fmt.Sprintf("rack%02d-node%03d", i%racks, i), Capacity: 1, Memory: 64 * gib}
	}
	need := equalShards(shards, 100*mib)
	start := time.Now()
	out, err := Place("big", need, cands)
	placed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlacement(out, nil, need, cands); err != nil {
		t.Fatal(err)
	}
	// Rack 7 dies: its 50 nodes' shards go to the 950 others, copies held by the next node.
	var alive []Candidate
	index := map[int]int{}
	for i, c := range cands {
		if i%racks != 7 {
			index[i] = len(alive)
			alive = append(alive, c)
		}
	}
	kept, prefer := make([]int, shards), make([][]int, shards)
	lost := 0
	for s, i := range out {
		if j, ok := index[i]; ok {
			kept[s] = j
			continue
		}
		kept[s] = -1
		lost++
		prefer[s] = []int{index[(i+1)%nodes]}
	}
	start = time.Now()
	next, err := PlaceRest("big", need, kept, prefer, alive)
	replaced := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlacement(next, kept, need, alive); err != nil {
		t.Fatal(err)
	}
	heaviest, onHolder := 0, 0
	count := make([]int, len(alive))
	for s, i := range next {
		count[i]++
		if kept[s] < 0 && i == prefer[s][0] {
			onHolder++
		}
	}
	for _, n := range count {
		heaviest = max(heaviest, n)
	}
	t.Logf("10,000 shards on 1,000 nodes placed in %v; a rack of 50 lost: its %d shards re-placed in %v, %d on their copy holder, heaviest node %d shards (even: %.1f)",
		placed.Round(time.Millisecond), lost, replaced.Round(time.Millisecond), onHolder, heaviest, float64(shards)/float64(len(alive)))
}
