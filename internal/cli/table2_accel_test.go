package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/bench"
)

// TestTable2Accel: bench --table2 --accel LIST runs did (and bcd, hals) once per setting, side
// by side, each row naming its setting; the other algorithms once.
func TestTable2Accel(t *testing.T) {
	for _, accel := range [][]string{{"--accel", "off,auto"}, {"--accel", "off;auto"}, {"--accel", "off", "--accel", "auto", "--accel", "off"}} {
		rows := table2Rows(t, append([]string{"--sizes", "2000", "--algos", "did,mu", "--max-iter", "4", "--fashion-mnist", ""}, accel...)...)
		var got []string
		for _, r := range rows {
			got = append(got, r.Algo+"/"+r.Accel)
			if r.Iterations != 4 || r.Error != "" {
				t.Errorf("%v: row %+v", accel, r)
			}
		}
		if strings.Join(got, " ") != "did/off did/auto mu/" {
			t.Errorf("%v: rows %v, want did/off did/auto mu/", accel, got)
		}
	}
	code, stdout, stderr := runNode(t, "bench", "--table2", "--sizes", "2000", "--algos", "did", "--max-iter", "2", "--fashion-mnist", "", "--accel", "2,3;auto")
	if code != 0 || !strings.Contains(stdout, "did accel 2,3,0.1") || !strings.Contains(stdout, "did accel auto") {
		t.Errorf("exit %d, %s%s: want rows did accel 2,3,0.1 and did accel auto", code, stdout, stderr)
	}
	// An algorithm without inner loops in the list runs plain; one fit takes one setting.
	if rows := table2Rows(t, "--sizes", "2000", "--algos", "mu", "--max-iter", "2", "--fashion-mnist", "", "--accel", "auto"); len(rows) != 1 || rows[0].Accel != "" || rows[0].Error != "" {
		t.Errorf("mu with --accel auto: %+v", rows)
	}
}

// TestTable2TimeCap: --time-cap stops a run, whose row says so; it is for --table2 only and
// must not be negative. How many iterations fit in the cap is the machine's business (under
// load, none did: the initialisation took the 300 ms), so the row's iterations are not
// asserted.
func TestTable2TimeCap(t *testing.T) {
	rows := table2Rows(t, "--sizes", "20000", "--algos", "mu", "--tol", "0", "--max-iter", "1000000000", "--fashion-mnist", "", "--time-cap", "300ms")
	if len(rows) != 1 || rows[0].Capped != "300ms" || rows[0].StopReason != bench.StopCapped || rows[0].Error != "" {
		t.Errorf("rows %+v", rows)
	}
	code, stdout, _ := runNode(t, "bench", "--table2", "--sizes", "20000", "--algos", "mu", "--tol", "0", "--max-iter", "1000000000", "--fashion-mnist", "", "--time-cap", "300ms")
	if code != 0 || !strings.Contains(stdout, "capped at 300ms (ratio") {
		t.Errorf("exit %d: %s", code, stdout)
	}
	for _, args := range [][]string{
		{"--table2", "--time-cap", "-1s"},
		{"--table2", "--time-cap", "soon"},
		{"--time-cap", "1m", "--input", "synthetic:m=5,n=100,k=3,seed=1", "--rank", "3"},
		{"--accel", "off;auto", "--input", "synthetic:m=5,n=100,k=3,seed=1", "--rank", "3"},
	} {
		var o, e bytes.Buffer
		if code := run(append([]string{"bench"}, args...), &o, &e); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, e.String())
		}
	}
}
