package kernels

import "testing"

func TestSanityAll(t *testing.T) {
	x := synthDense(20, 2000, 3, 1, 0)
	for _, a := range Algorithms() {
		p := 1
		if a.Distributed {
			p = 3
		}
		res := mustRun(t, x, p, Config{Algo: a.Name, K: 3, Seed: 1, Init: InitSpec{Method: InitRandom}, Stop: StopRule{Tol: 1e-6, MaxIter: 3000}, Threads: 2})
		t.Logf("%-9s iters=%4d conv=%v ratio=%.3g relerr=%.3g sec=%.3f coll/it=%.1f", a.Name, res.Iterations, res.Converged, Ratio(res.Objective, res.Initial), res.RelErr2(), res.Seconds, res.Comm.PerIteration)
	}
}
