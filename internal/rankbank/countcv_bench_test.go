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
	"text/tabwriter"
	"time"

	"github.com/didnmf/didnmf/internal/cpuusage"
)

// The count-loss study's settings (the sweeps' are Defaults, as BenchmarkRankBank's flags
// set them):
//
//	nice -n 10 go test ./internal/rankbank -run '^$' -bench CountCV -benchtime 1x -timeout 0 \
//	    -args -countcv.families negbin,poisson -countcv.max-k 12 -countcv.fits raw,sqrt -countcv.save /tmp/cv.gob
var (
	cvFamilies = flag.String("countcv.families", "negbin,poisson", "study the bank's cases of these families (comma-separated; a sparse case is its family's)")
	cvFits     = flag.String("countcv.fits", "raw,sqrt", "fit each case these ways (comma-separated: raw, sqrt, anscombe, kl)")
	cvMaxK     = flag.Int("countcv.max-k", 12, "study the cases of planted rank up to this")
	cvOnly     = flag.String("countcv.only", "", "study only the cases whose name contains this")
	cvSave     = flag.String("countcv.save", "", "write the outcomes to this `FILE` (gob) after every case")
	cvLoad     = flag.String("countcv.load", "", "start from the outcomes of these `FILES` (comma-separated), fitting only what they lack")
	cvCurves   = flag.Bool("countcv.curves", false, "print every case's mean held-out error by rank, per error")
	cvNoFit    = flag.Bool("countcv.score-only", false, "with -countcv.load, score its outcomes and fit nothing")
)

// BenchmarkCountCV runs the count-loss study (Study) over the full bank's cases that the
// flags select, and prints, for the shipped rule and RcppML's minimum, the score of every
// (fit, held-out error), and a line per case of the shipped rule's picks.
func BenchmarkCountCV(b *testing.B) {
	o := Defaults
	o.Seeds, o.Folds, o.TestFraction, o.MaxIter, o.StallTol = *benchSeeds, *benchFolds, *benchFraction, *benchMaxIter, *benchStallTol
	fams := strings.Split(*cvFamilies, ",")
	var fits []Fit
	for _, f := range strings.Split(*cvFits, ",") {
		fits = append(fits, Fit(strings.TrimSpace(f)))
	}
	for b.Loop() {
		cpu0 := cpuusage.Now()
		start := time.Now()
		var outs []*StudyOutcome
		for _, name := range strings.Split(*cvLoad, ",") {
			if name == "" {
				continue
			}
			f, err := os.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			var more []*StudyOutcome
			err = gob.NewDecoder(f).Decode(&more)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			outs = append(outs, more...)
		}
		selected := func(c Case) bool {
			return slices.Contains(fams, string(c.Family)) && c.K <= *cvMaxK && (*cvOnly == "" || strings.Contains(c.Name(), *cvOnly))
		}
		outs = slices.DeleteFunc(outs, func(s *StudyOutcome) bool { return !selected(s.Case) || !slices.Contains(fits, s.Fit) })
		done := map[string]bool{}
		for _, s := range outs {
			done[s.Case.Name()+"/"+string(s.Fit)] = true
		}
		for _, c := range Full() {
			if !selected(c) || *cvNoFit {
				continue
			}
			for _, fit := range fits {
				if done[c.Name()+"/"+string(fit)] {
					continue
				}
				c0 := cpuusage.Now()
				s, err := Study(context.Background(), c, fit, b.TempDir(), o)
				if err != nil {
					b.Fatal(err)
				}
				s.CPUSeconds = cpuusage.Now().Seconds - c0.Seconds
				fmt.Fprintf(os.Stderr, "%s %s: %s, %.1f CPU-s\n", c.Name(), fit, studyPicks(s, Shipped), s.CPUSeconds)
				outs = append(outs, s)
				if *cvSave != "" {
					f, err := os.Create(*cvSave)
					if err != nil {
						b.Fatal(err)
					}
					if err := gob.NewEncoder(f).Encode(outs); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
			}
		}
		order := map[string]int{}
		for i, c := range Full() {
			order[c.Name()] = i
		}
		slices.SortStableFunc(outs, func(x, y *StudyOutcome) int { return order[x.Case.Name()] - order[y.Case.Name()] })
		var cpu float64
		cpuBy := map[Fit]float64{}
		for _, s := range outs {
			cpu += s.CPUSeconds
			cpuBy[s.Fit] += s.CPUSeconds
		}
		fmt.Printf("count-loss study: %d case fits, %+v, %.0f s, %.0f CPU-s this run; CPU-s of the fits by fit: %v\n\n",
			len(outs), o, time.Since(start).Seconds(), cpuusage.Now().Seconds-cpu0.Seconds, cpuBy)
		for _, rule := range []Rule{Shipped, Candidates[0]} {
			fmt.Printf("rule: %s\n\n", rule.Name)
			WriteStudyTable(os.Stdout, ScoreStudy(outs, rule))
			fmt.Println()
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 1, ' ', 0)
		fmt.Fprintln(tw, "case\tfit\tCPU-s\tcapped\tshipped rule's pick by held-out error")
		for _, s := range outs {
			capped := 0
			for _, r := range s.Runs {
				if r.Capped {
					capped++
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%d/%d\t%s\n", s.Case.Name(), s.Fit, s.CPUSeconds, capped, len(s.Runs), studyPicks(s, Shipped))
		}
		tw.Flush()
		if *cvCurves {
			for _, s := range outs {
				fmt.Printf("\n%s %s\n", s.Case.Name(), s.Fit)
				for _, mt := range Metrics {
					var c []string
					for _, r := range s.Summary[mt] {
						c = append(c, fmt.Sprintf("%d:%.5g±%.2g", r.K, r.Test.Mean, r.Test.SE))
					}
					fmt.Printf("  %-16s %s\n", mt, strings.Join(c, " "))
				}
			}
		}
	}
}

// studyPicks is the rule's pick by every metric of a study outcome, "metric:K" (0: cannot tell).
func studyPicks(s *StudyOutcome, rule Rule) string {
	var p []string
	for _, mt := range Metrics {
		p = append(p, fmt.Sprintf("%s:%d", mt, rule.Pick(s.Summary[mt])))
	}
	return strings.Join(p, " ")
}
