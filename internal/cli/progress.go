package cli

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/didnmf/didnmf/kernels"
)

// progressPrinter shows a run's progress on stderr: a live bar redrawn in place on a terminal,
// plain lines (at most one a second) otherwise.
type progressPrinter struct {
	w        io.Writer
	tty      bool
	stop     kernels.StopRule
	start    time.Time
	last     time.Time
	lastIter int
	lastSec  float64
	pending  *kernels.Progress
	drawn    bool
}

func newProgressPrinter(w io.Writer, stop kernels.StopRule) *progressPrinter {
	return &progressPrinter{w: w, tty: isTerminal(w), stop: stop, start: time.Now()}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progressPrinter) update(pr kernels.Progress) {
	now := time.Now()
	interval := time.Second
	if p.tty {
		interval = 100 * time.Millisecond
	}
	if p.drawn && now.Sub(p.last) < interval {
		p.pending = &pr
		return
	}
	p.pending = nil
	p.draw(pr, now)
}

func (p *progressPrinter) draw(pr kernels.Progress, now time.Time) {
	// The rate counts iterations only: the first line's interval starts when the
	// initialisation ended, not when the run did.
	from := p.lastSec
	if p.lastIter == 0 {
		from = pr.InitSeconds
	}
	rate := 0.0
	if dt := pr.Seconds - from; dt > 0 && pr.Iteration > p.lastIter {
		rate = float64(pr.Iteration-p.lastIter) / dt
	}
	p.last, p.lastIter, p.lastSec = now, pr.Iteration, pr.Seconds
	p.drawn = true
	errs := fmt.Sprintf("objective ratio %.4g", pr.Ratio)
	if pr.RelErr2 > 0 {
		errs = fmt.Sprintf("rel_err2 %.4g, RMSE %.4g", pr.RelErr2, pr.RMSE)
	}
	if !p.tty {
		fmt.Fprintf(p.w, "iteration %d: %s, %s it/s, %.1f s\n", pr.Iteration, errs, rateText(rate), pr.Seconds)
		return
	}
	// Progress is the further of iterations against max-iter and of the ratio's decades
	// against tol's.
	frac := float64(pr.Iteration) / float64(p.stop.MaxIter)
	if p.stop.Tol > 0 && pr.Ratio > 0 && pr.Ratio < 1 {
		frac = math.Max(frac, math.Log(pr.Ratio)/math.Log(p.stop.Tol))
	}
	frac = math.Min(math.Max(frac, 0), 1)
	const width = 24
	fill := int(frac * width)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	fmt.Fprintf(p.w, "\r[%s] iter %d/%d  %s  %s it/s  %.1fs ", bar, pr.Iteration, p.stop.MaxIter, errs, rateText(rate), pr.Seconds)
}

// finish draws the last update and ends the bar's line.
func (p *progressPrinter) finish() {
	if p.pending != nil {
		p.draw(*p.pending, time.Now())
	}
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}

// warn prints news about the job on its own line (ending a live bar's line first).
func (p *progressPrinter) warn(msg string) {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
	fmt.Fprintf(p.w, "didnmf: warning: %s\n", msg)
	p.drawn = false
}
