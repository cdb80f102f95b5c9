package actors

import (
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/messages"
)

// TestInitParts: a streamed custom initialisation takes each part's chunks in order and
// within its size, and is whole only when every value came; anything else is an error
// naming the part, never a write out of place.
func TestInitParts(t *testing.T) {
	basis := messages.BlockPart_BLOCK_PART_INIT_BASIS
	coef := messages.BlockPart_BLOCK_PART_INIT_COEF
	type chunk struct {
		part   messages.BlockPart
		offset int64
		n      int
	}
	for _, c := range []struct {
		name     string
		withCoef bool
		chunks   []chunk
		addErr   string // the error of the last chunk, "" when every chunk is taken
		complete string // complete's error after the chunks, "" when whole
	}{
		{"whole, in pieces", true, []chunk{{basis, 0, 4}, {basis, 4, 2}, {coef, 0, 5}, {coef, 5, 5}}, "", ""},
		{"basis only", false, []chunk{{basis, 0, 6}}, "", ""},
		{"coefficients missing", true, []chunk{{basis, 0, 6}, {coef, 0, 3}}, "", "init coef: 3 of the shard's 10 values"},
		{"basis missing", false, nil, "", "init basis: 0 of its 6 values"},
		{"a gap", false, []chunk{{basis, 0, 2}, {basis, 3, 3}}, "init basis: a chunk at value 3, want 2", ""},
		{"an overlap", false, []chunk{{basis, 0, 4}, {basis, 2, 2}}, "init basis: a chunk at value 2, want 4", ""},
		{"past the end", false, []chunk{{basis, 0, 4}, {basis, 4, 3}}, "init basis: 3 values from 4, more than its 6", ""},
		{"coefficients not expected", false, []chunk{{coef, 0, 1}}, "the job streams no initial coefficients", ""},
		{"unknown part", true, []chunk{{messages.BlockPart(7), 0, 1}}, "unknown part 7", ""},
		{"the data part", true, []chunk{{messages.BlockPart_BLOCK_PART_DATA, 0, 1}}, "unknown part 0", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newInitParts(3, 5, 2, c.withCoef) // 3 features, 5 samples, K = 2
			var err error
			next := 1.0
			for i, ch := range c.chunks {
				vals := make([]float64, ch.n)
				for j := range vals {
					vals[j], next = next, next+1
				}
				if err = p.add(ch.part, ch.offset, vals); err != nil && i != len(c.chunks)-1 {
					t.Fatalf("chunk %d: %v", i, err)
				}
			}
			if c.addErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.addErr) {
					t.Fatalf("last chunk: %v, want %q", err, c.addErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("last chunk: %v", err)
			}
			err = p.complete()
			if c.complete == "" {
				if err != nil {
					t.Fatal(err)
				}
				if want := []float64{1, 2, 3, 4, 5, 6}; !slices.Equal(p.basis, want) {
					t.Errorf("basis %v, want %v", p.basis, want)
				}
				if c.withCoef && (p.coef[0] != 7 || p.coef[9] != 16) {
					t.Errorf("coef %v", p.coef)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.complete) {
				t.Errorf("complete: %v, want %q", err, c.complete)
			}
		})
	}
}
