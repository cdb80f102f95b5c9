package actors

import (
	"fmt"

	"github.com/didnmf/didnmf/messages"
)

// initParts assembles a custom initialisation the client streams with a shard's block
// (ingest "stream", BlockPart): the whole basis (features x K column-major, the kernels' B)
// and, when the job gives them, the shard's coefficients (K x its samples). Each part's
// chunks come in offset order, and nothing beyond a part's size is taken; a part's storage
// grows as its chunks arrive (see matio's BlockBuilder), never beyond its size. Only the
// shard's actor uses it.
type initParts struct {
	basis, coef []float64 // the values received; coef nil once complete: the job streams none
	size        [2]int    // values of the basis and of the coefficients (0: none streamed)
}

// initPartsBytes is the memory a shard's streamed initialisation takes: m x k and cols x k
// float64s (withCoef) or the basis alone.
func initPartsBytes(m, cols, k int64, withCoef bool) int64 {
	n := m * k
	if withCoef {
		n += cols * k
	}
	return 8 * n
}

// newInitParts prepares the parts of m features, cols samples and rank k.
func newInitParts(m, cols, k int, withCoef bool) *initParts {
	p := &initParts{size: [2]int{m * k, 0}}
	if withCoef {
		p.size[1] = cols * k
	}
	return p
}

// add takes one chunk's values for part at offset.
func (p *initParts) add(part messages.BlockPart, offset int64, values []float64) error {
	var dst *[]float64
	var i int
	switch part {
	case messages.BlockPart_BLOCK_PART_INIT_BASIS:
		dst, i = &p.basis, 0
	case messages.BlockPart_BLOCK_PART_INIT_COEF:
		if p.size[1] == 0 {
			return fmt.Errorf("init coef: the job streams no initial coefficients, and a chunk of them came")
		}
		dst, i = &p.coef, 1
	default:
		return fmt.Errorf("a chunk of an unknown part %d", part)
	}
	name := [2]string{"init basis", "init coef"}[i]
	got, size := len(*dst), p.size[i]
	if offset != int64(got) {
		return fmt.Errorf("%s: a chunk at value %d, want %d (chunks in order)", name, offset, got)
	}
	if len(values) > size-got {
		return fmt.Errorf("%s: %d values from %d, more than its %d", name, len(values), offset, size)
	}
	if end := got + len(values); end > cap(*dst) {
		grown := make([]float64, got, min(max(end, 2*cap(*dst), 1<<16), size)) // at least doubles, up to the part's size
		copy(grown, *dst)
		*dst = grown
	}
	*dst = append(*dst, values...)
	return nil
}

// complete checks every part is whole.
func (p *initParts) complete() error {
	if len(p.basis) != p.size[0] {
		return fmt.Errorf("init basis: %d of its %d values streamed", len(p.basis), p.size[0])
	}
	if len(p.coef) != p.size[1] {
		return fmt.Errorf("init coef: %d of the shard's %d values streamed", len(p.coef), p.size[1])
	}
	return nil
}
