package didnmf_test

import (
	"context"
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
