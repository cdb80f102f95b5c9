package rankbank

import (
	"context"
	"encoding/gob"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/cpuusage"
)

// The full bank's settings can be changed for an experiment (the defaults are Defaults):
//
//	go test ./internal/rankbank -run '^$' -bench RankBank -benchtime 1x -args -rankbank.folds 3 -rankbank.seeds 6
var (
	benchSeeds    = flag.Int("rankbank.seeds", Defaults.Seeds, "runs per rank")
	benchFolds    = flag.Int("rankbank.folds", Defaults.Folds, "held-out sets per rank")
	benchFraction = flag.Float64("rankbank.test-fraction", Defaults.TestFraction, "held-out share of the entries")
	benchMaxIter  = flag.Int("rankbank.max-iter", Defaults.MaxIter, "iteration cap")
	benchStallTol = flag.Float64("rankbank.stall-tol", Defaults.StallTol, "stall tolerance")
	benchOnly     = flag.String("rankbank.only", "", "sweep only the cases whose name contains this")
	benchMaxK     = flag.Int("rankbank.max-k", 0, "sweep only the cases of planted rank up to this (0: all)")
	benchSave     = flag.String("rankbank.save", "", "write the outcomes to this `FILE` (gob), for rescoring rules with -rankbank.load")
	benchLoad     = flag.String("rankbank.load", "", "start from the outcomes of these `FILES` (comma-separated, -rankbank.save's; a case in several: the last's), sweeping only the cases they lack")
	benchNoSweep  = flag.Bool("rankbank.score-only", false, "with -rankbank.load, score its outcomes (those -rankbank.only and -rankbank.max-k select) and sweep nothing")
)

// BenchmarkRankBank sweeps the full bank and prints the rules' table and a line per case.
func BenchmarkRankBank(b *testing.B) {
	o := Defaults
	o.Seeds, o.Folds, o.TestFraction, o.MaxIter, o.StallTol = *benchSeeds, *benchFolds, *benchFraction, *benchMaxIter, *benchStallTol
	for b.Loop() {
		cpu0 := cpuusage.Now()
		start := time.Now()
		var outs []*Outcome
		for _, name := range strings.Split(*benchLoad, ",") {
			if name == "" {
				continue
			}
			f, err := os.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			var more []*Outcome
			err = gob.NewDecoder(f).Decode(&more)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			outs = append(outs, more...)
		}
		// The bank's order, whichever file a case came from. An outcome of a case the bank no
		// longer holds as it was swept (another depth, or a count case calibrated before its
		// noise's own edge was, Matrix.NoiseEdge) is dropped, and the case swept again.
		order := map[string]int{}
		bank := map[string]Case{}
		for i, c := range Full() {
			order[c.Name()], bank[c.Name()] = i, c
		}
		n0 := len(outs)
		outs = slices.DeleteFunc(outs, func(o *Outcome) bool { return stale(o, bank) })
		if n0 > len(outs) {
			fmt.Fprintf(os.Stderr, "rank bank: %d loaded outcome(s) are of cases the bank no longer holds as they were swept: dropped\n", n0-len(outs))
		}
		// A case in several files: the last file's outcome.
		last := map[string]*Outcome{}
		for _, o := range outs {
			last[o.Case.Name()] = o
		}
		outs = slices.DeleteFunc(outs, func(o *Outcome) bool { return last[o.Case.Name()] != o })
		slices.SortStableFunc(outs, func(x, y *Outcome) int { return order[x.Case.Name()] - order[y.Case.Name()] })
		selected := func(c Case) bool {
			return (*benchOnly == "" || strings.Contains(c.Name(), *benchOnly)) && (*benchMaxK == 0 || c.K <= *benchMaxK)
		}
		// The file -rankbank.save writes keeps every loaded outcome, selected or not.
		unselected := slices.DeleteFunc(slices.Clone(outs), func(o *Outcome) bool { return selected(o.Case) })
		outs = slices.DeleteFunc(outs, func(o *Outcome) bool { return !selected(o.Case) })
		done := map[string]bool{}
		for _, o := range outs {
			done[o.Case.Name()] = true
		}
		for _, c := range Full() {
			if done[c.Name()] || !selected(c) || *benchNoSweep {
				continue
			}
			c0 := cpuusage.Now()
			out, err := Sweep(context.Background(), c, b.TempDir(), o)
			if err != nil {
				b.Fatal(err)
			}
			for i := range out.Summary { // the bases are not scored: keep the file small
				out.Summary[i].Stability.Basis, out.Summary[i].Stability.Labels = nil, nil
			}
			fmt.Fprintf(os.Stderr, "%s: %d (cannot tell %v), %.1f CPU-s\n", c.Name(), out.Suggestion.K, out.Suggestion.CannotTell, cpuusage.Now().Seconds-c0.Seconds)
			outs = append(outs, out)
			if *benchSave != "" { // after every case: a long run can be resumed with -rankbank.load
				f, err := os.Create(*benchSave)
				if err != nil {
					b.Fatal(err)
				}
				if err := gob.NewEncoder(f).Encode(slices.Concat(unselected, outs)); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		}
		cpu1 := cpuusage.Now()
		fmt.Printf("rank bank: %d cases, %+v, %.0f s, %.0f CPU-s\n\n", len(outs), o, time.Since(start).Seconds(), cpu1.Seconds-cpu0.Seconds)
		WriteTable(os.Stdout, Scores(outs, append([]Rule{Shipped}, Candidates...)))
		fmt.Println()
		WriteCases(os.Stdout, outs)
	}
}

// stale tells whether a loaded outcome is of a case the bank no longer holds as it was swept:
// another case, or the same case's matrix made otherwise (the generator changed: the bank's
// first calibration of counts, say), which it finds by making the matrix again.
func stale(o *Outcome, bank map[string]Case) bool {
	c, ok := bank[o.Case.Name()]
	if !ok || c.Depth != o.Case.Depth || c.Seed != o.Case.Seed || c.Sparse != o.Case.Sparse || !slices.Equal(c.Ranks, o.Case.Ranks) || o.Matrix == nil {
		return true
	}
	x, err := c.Generate()
	return err != nil || !slices.Equal(x.X, o.Matrix.X)
}
