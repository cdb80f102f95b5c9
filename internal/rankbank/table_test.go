package rankbank

import (
	"strings"
	"testing"
)

// TestWriteTables: both tables have one header cell per row cell, the families and
// visibilities any score has as sorted columns, and "-" where a score has no case.
func TestWriteTables(t *testing.T) {
	a := Score{Rule: "a", Visible: 4, Exact: 3, Within1: 4, FalseCannot: 1, Below: 2, Cannot: 2,
		ByFamily: map[string][2]int{"poisson": {1, 2}, "gaussian": {2, 2}}, ByVisibility: map[string][2]int{"v=2": {3, 4}}}
	b := Score{Rule: "b", ByFamily: map[string][2]int{"uniform": {0, 1}}}
	for _, c := range []struct {
		name  string
		write func(*strings.Builder)
		want  []string
	}{
		{"rules", func(w *strings.Builder) { WriteTable(w, []Score{a, b}) }, []string{
			"| rule | exact | within ±1 | cannot tell, below the noise | cannot tell, visible (wrong) | gaussian | poisson | uniform | v=2 |",
			"|---|---|---|---|---|---|---|---|---|",
			"| a | 75% (3/4) | 100% (4/4) | 100% (2/2) | 25% (1/4) | 100% (2/2) | 50% (1/2) | - | 75% (3/4) |",
			"| b | - | - | - | - | - | - | 0% (0/1) | - |",
		}},
		{"study", func(w *strings.Builder) { WriteStudyTable(w, []StudyScore{{Fit: "sqrt", Metric: "sse", Score: a}}) }, []string{
			"| fit | held-out error | exact | within ±1 | cannot tell, below the noise | cannot tell, visible (wrong) | gaussian | poisson | v=2 |",
			"|---|---|---|---|---|---|---|---|---|",
			"| sqrt | sse | 75% (3/4) | 100% (4/4) | 100% (2/2) | 25% (1/4) | 100% (2/2) | 50% (1/2) | 75% (3/4) |",
		}},
	} {
		var w strings.Builder
		c.write(&w)
		if got := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}
