package didnmf

import (
	"fmt"
	"path/filepath"

	"github.com/didnmf/didnmf/sweep"
)

// SpectraFile is the name Save gives the spectra of rank k (see saveSpectra), which
// `didnmf consensus` reads.
func SpectraFile(k int) string { return fmt.Sprintf("spectra_%d.npy", k) }

// saveSpectra writes into dir, for every rank of the sweep, the bases of all its runs that
// ended, each column scaled to unit L2 norm (a zero column stays zero): spectra_K.npy,
// features x (K*runs), run-major (columns r*K..r*K+K-1 are run r's, the runs in the order of
// sweep.json's runs of rank K), and names the file in rep's summary of the rank. They are
// what cNMF's consensus clusters (its merged spectra): O(runs x K x features) values, the
// only thing `didnmf consensus` needs of the runs.
func (s *SweepResult) saveSpectra(dir string, rep *SweepReport) error {
	for i, r := range s.Summary {
		var bases [][]float64
		m := 0
		for _, run := range s.Runs {
			if run.Err == nil && run.K == r.K && run.Result != nil && len(run.Result.B) > 0 {
				bases, m = append(bases, run.Result.B), run.Result.M
			}
		}
		if len(bases) == 0 || i >= len(rep.PerRank) {
			continue
		}
		k, cols := r.K, len(bases)*r.K
		data := make([]float64, m*cols) // row-major, features x (K*runs)
		col := make([]float64, m)
		for ri, b := range bases {
			for p := 0; p < k; p++ {
				copy(col, b[p*m:(p+1)*m])
				sweep.UnitNorm(col)
				c := ri*k + p
				for f, v := range col {
					data[f*cols+c] = v
				}
			}
		}
		name := SpectraFile(k)
		if err := writeNPYFile(filepath.Join(dir, name), m, cols, data); err != nil {
			return err
		}
		rep.PerRank[i].Spectra = name
	}
	return nil
}
