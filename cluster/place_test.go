package cluster

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

func equalShards(p int, size int64) []int64 {
	s := make([]int64, p)
	for i := range s {
		s[i] = size
	}
	return s
}

func nodes(n, capacity int, memory int64) []Candidate {
	c := make([]Candidate, n)
	for i := range c {
		c[i] = Candidate{Name: fmt.Sprintf("node-%d", i), Capacity: capacity, Memory: memory}
	}
	return c
}

// owners maps Place's indices to candidate names.
func owners(t *testing.T, job string, shards []int64, cands []Candidate) []string {
	t.Helper()
	idx, err := Place(job, shards, cands)
	if err != nil {
		t.Fatalf("Place: %v", err)
	}
	if len(idx) != len(shards) {
		t.Fatalf("Place returned %d owners for %d shards", len(idx), len(shards))
	}
	out := make([]string, len(idx))
	for s, i := range idx {
		if i < 0 || i >= len(cands) {
			t.Fatalf("shard %d: index %d out of range", s, i)
		}
		out[s] = cands[i].Name
	}
	return out
}

func TestPlaceDeterministicAndOrderIndependent(t *testing.T) {
	t.Parallel()
	cands := []Candidate{
		{Name: "alpha", Capacity: 1, Memory: 10 * gib},
		{Name: "beta", Capacity: 3, Memory: 2 * gib},
		{Name: "gamma", Capacity: 2, Memory: 10 * gib},
		{Name: "delta", Capacity: 1, Memory: 512 * mib},
		{Name: "epsilon", Capacity: 5, Memory: 10 * gib},
	}
	shards := make([]int64, 300)
	for i := range shards {
		shards[i] = int64(1+i%7) * 20 * mib
	}
	want := owners(t, "job-1", shards, cands)
	if again := owners(t, "job-1", shards, cands); !slices.Equal(again, want) {
		t.Fatal("Place is not deterministic")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		perm := slices.Clone(cands)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		if got := owners(t, "job-1", shards, perm); !slices.Equal(got, want) {
			t.Fatalf("trial %d: placement depends on candidate order %v", trial, perm)
		}
	}
	// A different job spreads differently.
	if other := owners(t, "job-2", shards, cands); slices.Equal(other, want) {
		t.Error("jobs job-1 and job-2 got identical placements of 300 shards")
	}
}

func TestPlaceWeighting(t *testing.T) {
	t.Parallel()
	const shards = 10000
	tests := []struct {
		name       string
		capacities []int
	}{
		{"1:2", []int{1, 2}},
		{"1:1:2", []int{1, 1, 2}},
		{"1:2:3:4", []int{1, 2, 3, 4}},
		{"equal 5", []int{1, 1, 1, 1, 1}},
		{"10:1", []int{10, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var cands []Candidate
			total := 0
			for i, c := range tt.capacities {
				cands = append(cands, Candidate{Name: fmt.Sprintf("w%d", i), Capacity: c, Memory: math.MaxInt64})
				total += c
			}
			idx, err := Place("weights", equalShards(shards, 1), cands)
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]int, len(cands))
			for _, i := range idx {
				counts[i]++
			}
			for i, c := range cands {
				want := float64(shards) * float64(c.Capacity) / float64(total)
				// 5% of the expected count is about 5 standard deviations and more.
				if got := float64(counts[i]); math.Abs(got-want) > 0.05*want+20 {
					t.Errorf("%s (capacity %d) got %d shards, want about %.0f", c.Name, c.Capacity, counts[i], want)
				}
			}
			t.Logf("capacities %v -> shards %v", tt.capacities, counts)
		})
	}
}

func TestPlaceMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		shards []int64
		cands  []Candidate
	}{
		{"tight fit", equalShards(12, 100*mib), []Candidate{
			{Name: "a", Capacity: 5, Memory: 400 * mib},
			{Name: "b", Capacity: 1, Memory: 400 * mib},
			{Name: "c", Capacity: 1, Memory: 400 * mib},
		}},
		{"mixed sizes", []int64{300 * mib, 10 * mib, 200 * mib, 50 * mib, 300 * mib, 1, 0, 120 * mib}, []Candidate{
			{Name: "big", Capacity: 10, Memory: 350 * mib},
			{Name: "mid", Capacity: 1, Memory: 700 * mib},
			{Name: "small", Capacity: 1, Memory: 700 * mib},
		}},
		{"empty shards need no memory", equalShards(5, 0), []Candidate{{Name: "z", Capacity: 1, Memory: 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, err := Place("mem", tt.shards, tt.cands)
			if err != nil {
				t.Fatal(err)
			}
			used := make([]int64, len(tt.cands))
			for s, i := range idx {
				used[i] += tt.shards[s]
			}
			for i, c := range tt.cands {
				if used[i] > c.Memory {
					t.Errorf("%s holds %d bytes, offers %d", c.Name, used[i], c.Memory)
				}
			}
		})
	}

	// With ample memory the heavy candidate takes most shards; capping its memory moves only the
	// overflow, to the candidates ranked next.
	cands := []Candidate{{Name: "heavy", Capacity: 8, Memory: 100 * gib}, {Name: "x", Capacity: 1, Memory: 100 * gib}, {Name: "y", Capacity: 1, Memory: 100 * gib}}
	shards := equalShards(100, gib)
	free := owners(t, "cap", shards, cands)
	cands[0].Memory = 40 * gib
	capped := owners(t, "cap", shards, cands)
	heavy := 0
	for s := range shards {
		if capped[s] == "heavy" {
			heavy++
			if free[s] != "heavy" {
				t.Errorf("shard %d moved to heavy when heavy lost memory", s)
			}
		}
	}
	if heavy != 40 {
		t.Errorf("capped heavy holds %d shards of 1 GiB, want 40 (it ranks first for most)", heavy)
	}
}

func TestPlaceCapacityError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		shards []int64
		cands  []Candidate
		want   string
	}{
		{
			"job too big",
			equalShards(8, 410*mib),
			[]Candidate{{Name: "node-a", Capacity: 1, Memory: 512 * mib}, {Name: "node-b", Capacity: 1, Memory: 512 * mib}, {Name: "node-c", Capacity: 1, Memory: 512 * mib}},
			"job needs 3.2 GiB for 8 shards (largest 410 MiB); the cluster's 3 members offer 1.5 GiB (largest 512 MiB free on node-a): add nodes, raise --memory, or use more shards",
		},
		{
			"shard larger than any node",
			[]int64{2 * gib, 10 * mib},
			[]Candidate{{Name: "small", Capacity: 1, Memory: 1536 * mib}, {Name: "big", Capacity: 1, Memory: 1800 * mib}},
			"job needs 2.0 GiB for 2 shards (largest 2.0 GiB); the cluster's 2 members offer 3.3 GiB (largest 1.8 GiB free on big): add nodes, raise --memory, or use more shards",
		},
		{
			"fragmented",
			equalShards(3, 600*mib),
			[]Candidate{{Name: "solo", Capacity: 1, Memory: 1000 * mib}},
			"job needs 1.8 GiB for 3 shards (largest 600 MiB); the cluster's 1 member offers 1000 MiB (largest 1000 MiB free on solo): add nodes, raise --memory, or use more shards",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx, err := Place("big-job", tt.shards, tt.cands)
			var ce *CapacityError
			if !errors.As(err, &ce) {
				t.Fatalf("Place = %v, %v; want a *CapacityError", idx, err)
			}
			if err.Error() != tt.want {
				t.Errorf("message\n got %s\nwant %s", err, tt.want)
			}
			if ce.Shards != len(tt.shards) || ce.Members != len(tt.cands) || ce.Shard < 0 || ce.Shard >= len(tt.shards) {
				t.Errorf("fields %+v", ce)
			}
		})
	}
}

func TestPlaceInvalid(t *testing.T) {
	t.Parallel()
	ok := Candidate{Name: "ok", Capacity: 1, Memory: gib}
	tests := []struct {
		name   string
		shards []int64
		cands  []Candidate
		want   string
	}{
		{"no candidates", []int64{1}, nil, "no members"},
		{"capacity 0", []int64{1}, []Candidate{ok, {Name: "zero", Memory: gib}}, `"zero" has capacity 0`},
		{"negative capacity", []int64{1}, []Candidate{{Name: "neg", Capacity: -2, Memory: gib}}, "capacity -2"},
		{"negative memory", []int64{1}, []Candidate{{Name: "m", Capacity: 1, Memory: -1}}, "negative memory"},
		{"duplicate", []int64{1}, []Candidate{ok, ok}, "twice"},
		{"no name", []int64{1}, []Candidate{{Capacity: 1, Memory: 1}}, "no name"},
		{"negative shard", []int64{1, -5}, []Candidate{ok}, "shard 1"},
	}
	for _, tt := range tests {
		_, err := Place("j", tt.shards, tt.cands)
		var ce *CapacityError
		if err == nil || errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Place error %v, want a plain error mentioning %q", tt.name, err, tt.want)
		}
	}
	if idx, err := Place("j", nil, []Candidate{ok}); err != nil || len(idx) != 0 {
		t.Errorf("no shards: got %v, %v; want an empty placement", idx, err)
	}
}

func TestPlaceStability(t *testing.T) {
	t.Parallel()
	const p = 1000
	shards := equalShards(p, mib)
	for n := 3; n <= 8; n++ {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			before := nodes(n, 1, math.MaxInt64)
			own := owners(t, "stable", shards, before)

			// Add a node (at the front, so indices shift too).
			after := append([]Candidate{{Name: "node-new", Capacity: 1, Memory: math.MaxInt64}}, before...)
			ownAfter := owners(t, "stable", shards, after)
			moved := 0
			for s := range shards {
				if ownAfter[s] != own[s] {
					moved++
					if ownAfter[s] != "node-new" {
						t.Errorf("shard %d moved from %s to %s, not to the new node", s, own[s], ownAfter[s])
					}
				}
			}
			limit := 1.3 * p / float64(n+1)
			t.Logf("n=%d -> %d: %d of %d shards moved (ideal %.0f)", n, n+1, moved, p, p/float64(n+1))
			if float64(moved) > limit {
				t.Errorf("adding a node moved %d shards, more than %.0f", moved, limit)
			}
			if moved == 0 {
				t.Error("adding a node moved no shard to it")
			}

			// Remove an old node: only its own shards move.
			gone := before[n/2].Name
			without := slices.DeleteFunc(slices.Clone(after), func(c Candidate) bool { return c.Name == gone })
			ownWithout := owners(t, "stable", shards, without)
			for s := range shards {
				switch {
				case ownAfter[s] == gone && ownWithout[s] == gone:
					t.Errorf("shard %d still on removed %s", s, gone)
				case ownAfter[s] != gone && ownWithout[s] != ownAfter[s]:
					t.Errorf("shard %d moved from %s to %s when unrelated %s left", s, ownAfter[s], ownWithout[s], gone)
				}
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{10 * kib, "10 KiB"},
		{410 * mib, "410 MiB"},
		{1023*mib + 1000*kib, "1.0 GiB"},
		{3280 * mib, "3.2 GiB"},
		{9*gib + 970*mib, "9.9 GiB"},
		{9*gib + 1000*mib, "10 GiB"},
		{math.MaxInt64, "8.0 EiB"},
		{-2 * kib, "-2.0 KiB"},
	}
	for _, tt := range tests {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestPlaceLoadBound: whatever the job id, no member gets more than LoadBound times its share
// of a job's shards (or its share rounded up, when that is more), nor, while there are shards
// enough, fewer than its share divided by LoadBound; pure rendezvous hashing ensures neither
// for few shards.
func TestPlaceLoadBound(t *testing.T) {
	cands := []Candidate{{Name: "a", Capacity: 1, Memory: 1 << 40}, {Name: "b", Capacity: 1, Memory: 1 << 40}, {Name: "c", Capacity: 2, Memory: 1 << 40}}
	for _, p := range []int{1, 2, 4, 6, 8, 24, 100} {
		need := make([]int64, p)
		for j := 0; j < 200; j++ {
			job := fmt.Sprintf("job-%d", j)
			at, err := Place(job, need, cands)
			if err != nil {
				t.Fatal(err)
			}
			count := make([]int, len(cands))
			for _, i := range at {
				count[i]++
			}
			for i, c := range cands {
				share := float64(p) * float64(c.Capacity) / 4
				most := max(1, int(math.Ceil(share)), int(math.Floor(LoadBound*share)))
				least := min(int(math.Floor(share)), max(1, int(math.Floor(share/LoadBound))))
				if count[i] > most || count[i] < least {
					t.Fatalf("%s, %d shards: %s got %d, want %d to %d", job, p, c.Name, count[i], least, most)
				}
			}
		}
	}
}

// TestPlaceEven: on equal members a job's shards are spread as evenly as LoadBound asks, for
// every job id: no member idle while another holds two, none above the share rounded up.
func TestPlaceEven(t *testing.T) {
	tests := []struct {
		members, shards int
		want            []int // counts, sorted
	}{
		{3, 2, []int{0, 1, 1}},
		{3, 3, []int{1, 1, 1}},
		{3, 4, []int{1, 1, 2}},
		{3, 5, []int{1, 2, 2}},
		{3, 6, []int{2, 2, 2}},
		{4, 6, []int{1, 1, 2, 2}},
		{2, 5, []int{2, 3}},
		{8, 9, []int{1, 1, 1, 1, 1, 1, 1, 2}},
	}
	for _, tt := range tests {
		cands := nodes(tt.members, 1, 1<<40)
		for j := 0; j < 300; j++ {
			at, err := Place(fmt.Sprintf("job-%d", j), make([]int64, tt.shards), cands)
			if err != nil {
				t.Fatal(err)
			}
			count := make([]int, tt.members)
			for _, i := range at {
				count[i]++
			}
			slices.Sort(count)
			if !slices.Equal(count, tt.want) {
				t.Fatalf("%d shards on %d members, job-%d: counts %v, want %v", tt.shards, tt.members, j, count, tt.want)
			}
		}
	}
}

// TestPlaceSharedMachine: candidates on one machine share its memory. Three nodes on a machine
// with 10 GiB free, each offering those 10 GiB, hold 10 GiB of shards between them, not 30; a
// node on a machine of its own keeps its own.
func TestPlaceSharedMachine(t *testing.T) {
	same := []Candidate{
		{Name: "a", Capacity: 1, Memory: 10 * gib, Machine: "m1"},
		{Name: "b", Capacity: 1, Memory: 10 * gib, Machine: "m1"},
		{Name: "c", Capacity: 1, Memory: 12 * gib, Machine: "m1"},
	}
	if _, err := Place("fits", equalShards(5, 2*gib), same); err != nil {
		t.Errorf("5 shards of 2 GiB on a machine with 10 GiB: %v", err)
	}
	_, err := Place("too-big", equalShards(6, 2*gib), same)
	var ce *CapacityError
	if !errors.As(err, &ce) {
		t.Fatalf("6 shards of 2 GiB on one machine with 10 GiB: got %v, want a CapacityError", err)
	}
	if ce.Offered != 10*gib {
		t.Errorf("the error counts %s offered, want the machine's 10 GiB once", FormatBytes(ce.Offered))
	}
	// The same nodes on machines of their own hold the 6 shards.
	apart := slices.Clone(same)
	for i := range apart {
		apart[i].Machine = ""
	}
	if _, err := Place("too-big", equalShards(6, 2*gib), apart); err != nil {
		t.Errorf("6 shards of 2 GiB on three machines: %v", err)
	}
}

// TestPlaceRest: a recovering job keeps the shards that have a node, and its lost node's shards
// go to the nodes holding their checkpoint copies only within the load bounds and memory: they
// spread over the survivors instead of doubling the buddy's load.
func TestPlaceRest(t *testing.T) {
	b, c := Candidate{Name: "b", Capacity: 1, Memory: 10 * gib}, Candidate{Name: "c", Capacity: 1, Memory: 10 * gib}
	tests := []struct {
		name   string
		cands  []Candidate
		at     []int
		prefer [][]int
		want   []int
	}{
		// a held shards 0 and 1 and died; b (index 0) holds both copies: it takes one, c the other.
		{"spread", []Candidate{b, c}, []int{-1, -1, 0, 1}, [][]int{{0}, {0}, nil, nil}, []int{0, 1, 0, 1}},
		// Within the bound the copy's holder is taken, whatever the hash prefers.
		{"copy holder", []Candidate{b, c}, []int{-1, 0, 1, 1}, [][]int{{0}, nil, nil, nil}, []int{0, 0, 1, 1}},
		{"second holder", []Candidate{b, c}, []int{-1, 0, 0, 1}, [][]int{{0, 1}, nil, nil, nil}, []int{1, 0, 0, 1}},
		// A holder without the memory is passed over.
		{"no memory", []Candidate{{Name: "b", Capacity: 1, Memory: 0}, c}, []int{-1, 0, 1, 1}, [][]int{{0}, nil, nil, nil}, []int{1, 0, 1, 1}},
		// Nothing kept and no preferences: Place.
		{"fresh", []Candidate{b, c}, nil, nil, nil},
	}
	for _, tt := range tests {
		shards := equalShards(4, gib)
		got, err := PlaceRest("job", shards, tt.at, tt.prefer, tt.cands)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		want := tt.want
		if want == nil {
			if want, err = Place("job", shards, tt.cands); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: PlaceRest = %v, want %v", tt.name, got, want)
		}
	}
	for _, bad := range []struct {
		at     []int
		prefer [][]int
	}{{[]int{0, 0, 0}, nil}, {[]int{0, 0, 0, 2}, nil}, {nil, [][]int{nil}}} {
		if _, err := PlaceRest("job", equalShards(4, gib), bad.at, bad.prefer, []Candidate{b, c}); err == nil {
			t.Errorf("PlaceRest(at %v, prefer %v) accepted", bad.at, bad.prefer)
		}
	}
}

// TestPlaceLoad: the shards of a new job go to the least loaded candidates first (Load, other
// jobs' shards), filling them up to one level of load per capacity; memory still decides when
// the unloaded cannot hold a shard.
func TestPlaceLoad(t *testing.T) {
	withLoad := func(caps, loads []int, mem int64) []Candidate {
		c := make([]Candidate, len(caps))
		for i := range c {
			c[i] = Candidate{Name: string(rune('a' + i)), Capacity: caps[i], Memory: mem, Load: loads[i]}
		}
		return c
	}
	tests := []struct {
		name         string
		caps, loads  []int
		shards       int
		least, most  []int // each candidate's count, over every job id
		memoryOfLast int64 // 0: plenty for all
	}{
		{"one loaded of three", []int{1, 1, 1}, []int{1, 0, 0}, 1, []int{0, 0, 0}, []int{0, 1, 1}, 0},
		{"two loaded of three", []int{1, 1, 1}, []int{1, 1, 0}, 1, []int{0, 0, 1}, []int{0, 0, 1}, 0},
		{"a busy member sits out", []int{1, 1, 1}, []int{4, 0, 0}, 6, []int{0, 3, 3}, []int{0, 3, 3}, 0},
		{"the level is reached", []int{1, 1, 1}, []int{2, 0, 0}, 4, []int{0, 2, 2}, []int{0, 2, 2}, 0},
		{"above the level, all share", []int{1, 1, 1}, []int{1, 0, 0}, 5, []int{1, 2, 2}, []int{2, 2, 2}, 0},
		{"capacity weighs", []int{1, 1, 2}, []int{2, 0, 0}, 4, []int{0, 1, 2}, []int{0, 2, 3}, 0},
		{"memory overrides load", []int{1, 1, 1}, []int{0, 5, 5}, 2, []int{0, 0, 0}, []int{0, 2, 2}, -1},
	}
	for _, tt := range tests {
		cands := withLoad(tt.caps, tt.loads, 1<<40)
		if tt.memoryOfLast < 0 { // the unloaded candidate holds nothing
			cands[0].Memory = 0
			cands[0].Machine = "small"
			cands = append(cands, Candidate{Name: "z", Capacity: 1, Memory: 0, Machine: "small", Load: 9})
			tt.least, tt.most = append(tt.least, 0), append(tt.most, 0)
		}
		for j := 0; j < 300; j++ {
			at, err := Place(fmt.Sprintf("job-%d", j), equalShards(tt.shards, 1), cands)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			count := make([]int, len(cands))
			for _, i := range at {
				count[i]++
			}
			for i := range count {
				if count[i] < tt.least[i] || count[i] > tt.most[i] {
					t.Fatalf("%s, job-%d: counts %v, want each within %v..%v", tt.name, j, count, tt.least, tt.most)
				}
			}
		}
	}
	// A sweep's three one-shard jobs, placed in turn, each counting the ones before: one a
	// member, for every triple of job ids.
	for j := 0; j < 300; j++ {
		cands := withLoad([]int{1, 1, 1}, []int{0, 0, 0}, 1<<40)
		for r := range 3 {
			at, err := Place(fmt.Sprintf("job-%d-%d", j, r), equalShards(1, 1), cands)
			if err != nil {
				t.Fatal(err)
			}
			cands[at[0]].Load++
		}
		for _, c := range cands {
			if c.Load != 1 {
				t.Fatalf("three jobs in turn, triple %d: loads %v", j, []int{cands[0].Load, cands[1].Load, cands[2].Load})
			}
		}
	}
	if _, err := Place("neg", equalShards(1, 1), withLoad([]int{1}, []int{-1}, 1)); err == nil || !strings.Contains(err.Error(), "negative load") {
		t.Errorf("a negative load: %v", err)
	}
}
