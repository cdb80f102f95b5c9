package didnmf_test

import (
	"context"
	"strings"
	"testing"

	"github.com/didnmf/didnmf"
)

// TestAccelGoAPI: Spec.Accel (NewSpec gives DefaultAccel) reaches the kernels' options of the
// job, in this process and on actors, and its report records it.
func TestAccelGoAPI(t *testing.T) {
	def, err := didnmf.ParseAccel(didnmf.DefaultAccel)
	if err != nil {
		t.Fatal(err)
	}
	spec := didnmf.NewSpec([]string{"synthetic:m=6,n=300,k=3,seed=2"}, didnmf.DID, 3, 2)
	if spec.Accel != def {
		t.Errorf("NewSpec's accel is %v, want DefaultAccel %v", spec.Accel, def)
	}
	spec.Accel = didnmf.AccelAuto
	spec.Stop.MaxIter = 4
	j, err := didnmf.Open(spec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Config().Options.Accel; got != didnmf.AccelAuto {
		t.Errorf("the job's options have accel %+v, want %+v", got, didnmf.AccelAuto)
	}
	j.Close()
	for name, target := range map[string]didnmf.Target{"local": didnmf.Local(1), "actors": didnmf.InProcess(2, 1)} {
		res, err := didnmf.Run(context.Background(), spec, target, didnmf.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := res.Report().Accel; got != "auto" {
			t.Errorf("%s: report.json says accel %q, want auto", name, got)
		}
	}
}

// TestAccelSettlesAtTheCap: an extrapolating run stopped by its iteration cap does not return
// the overshoot of its last iteration. On the paper's synthetic at 1e5, the 25th iteration of
// --accel auto overshoots (rel_err2 2.4 times the 24th's); the run takes one more iteration,
// back below, in this process and on actors (whose shards decide the stop on their own),
// with the same bits.
func TestAccelSettlesAtTheCap(t *testing.T) {
	spec := didnmf.NewSpec([]string{"synthetic:m=5,n=100000,k=3,seed=1"}, didnmf.DID, 3, 3)
	spec.Accel = didnmf.AccelAuto
	spec.Stop.Tol, spec.Stop.StallTol = 0, 0
	run := func(maxIter int, target didnmf.Target) *didnmf.Result {
		s := *spec
		s.Stop.MaxIter = maxIter
		res, err := didnmf.Run(context.Background(), &s, target, didnmf.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	at24 := run(24, didnmf.Local(2))
	want := run(25, didnmf.Local(2))
	if want.Iterations != 26 || !(want.RelErr2() < at24.RelErr2()) {
		t.Fatalf("capped at 25: %d iterations, rel_err2 %.4g; want 26 and below the 24th's %.4g", want.Iterations, want.RelErr2(), at24.RelErr2())
	}
	if stop := want.Report().Stop; !strings.Contains(stop, "it took 1 more iteration past the limit to end at its lowest error") {
		t.Errorf("report.json's stop: %q", stop)
	}
	got := run(25, didnmf.InProcess(3, 1))
	if got.Iterations != want.Iterations || !sameBits(got.B, want.B) || !sameBits(got.C, want.C) {
		t.Errorf("on actors: %d iterations, or other bits than in this process", got.Iterations)
	}
}
