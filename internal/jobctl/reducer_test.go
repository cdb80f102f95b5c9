package jobctl

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// TestReducerScenarios runs the scenarios of testdata/reducer: each file builds a reducer
// and feeds it messages; every command prints what the reducer asks its runtime to do.
//
//	reducer epoch=E lo=L hi=H self=ADDR [parent=ADDR]   children in the input, a line each: ADDR LO HI
//	partial lo=L hi=H seq=S values=(v,...) [op=allreduce|allgather|reducescatter] [segments=(n,...)]
//	        [epoch=E] [job=J] [iteration=I] [init] [corrupt]
//	reduced seq=S values=(v,...) [epoch=E] [corrupt]
//	stop [job=J]
//	counters
//
// Run with -rewrite to regenerate the expected outputs after a deliberate change; read the
// diff before committing it.
func TestReducerScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/reducer", func(t *testing.T, path string) {
		var r *Reducer
		var a *messages.ReducerAssignment
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "reducer":
				a = &messages.ReducerAssignment{JobId: "j", Coordinator: &messages.Pid{Address: "coord", Id: "j-coordinator"}}
				var self, parent string
				d.ScanArgs(t, "epoch", &a.Epoch)
				d.ScanArgs(t, "lo", &a.Lo)
				d.ScanArgs(t, "hi", &a.Hi)
				d.ScanArgs(t, "self", &self)
				if d.MaybeScanArgs(t, "parent", &parent) {
					a.Parent = &messages.Pid{Address: parent, Id: "parent"}
				}
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					var addr string
					var lo, hi int64
					if _, err := fmt.Sscan(line, &addr, &lo, &hi); err != nil {
						d.Fatalf(t, "child %q: %v", line, err)
					}
					a.Children = append(a.Children, &messages.Pid{Address: addr, Id: fmt.Sprintf("[%d,%d)", lo, hi)})
					a.ChildRanges = append(a.ChildRanges, lo, hi)
				}
				var err error
				r, err = NewReducer(a, self, 0)
				if err != nil {
					return "refused: " + err.Error()
				}
				return "ok"
			case "partial":
				p := &messages.Partial{JobId: "j", Epoch: a.Epoch, Op: int32(kernels.OpAllReduce), Label: "x"}
				d.ScanArgs(t, "lo", &p.Lo)
				d.ScanArgs(t, "hi", &p.Hi)
				d.ScanArgs(t, "seq", &p.Seq)
				d.MaybeScanArgs(t, "epoch", &p.Epoch)
				d.MaybeScanArgs(t, "job", &p.JobId)
				d.MaybeScanArgs(t, "iteration", &p.Iteration)
				p.Init = d.HasArg("init")
				var op string
				if d.MaybeScanArgs(t, "op", &op) {
					p.Op = int32(opNamed(t, op))
				}
				if arg, ok := d.Arg("segments"); ok {
					for _, v := range arg.Vals {
						n, _ := strconv.ParseInt(v, 10, 64)
						p.Segments = append(p.Segments, n)
					}
				}
				p.Chunk = chunkOf(t, d)
				return stepped(t, r, p)
			case "reduced":
				m := &messages.Reduced{JobId: "j", Epoch: a.Epoch, Lo: a.Lo, Hi: a.Hi}
				d.ScanArgs(t, "seq", &m.Seq)
				d.MaybeScanArgs(t, "epoch", &m.Epoch)
				m.Chunk = chunkOf(t, d)
				return stepped(t, r, m)
			case "stop":
				m := &messages.StopJob{JobId: "j"}
				d.MaybeScanArgs(t, "job", &m.JobId)
				return stepped(t, r, m)
			case "counters":
				c := r.Counters()
				return fmt.Sprintf("messages %d, stale %d, duplicates %d, reductions %d, init reductions %d",
					c.Messages+c.InitMessages, c.Stale, c.Duplicates, c.Reductions, c.InitReductions)
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// TestReducerRefusesOtherEvents: an event a reducer does not take is an error, not dropped.
func TestReducerRefusesOtherEvents(t *testing.T) {
	r, err := NewReducer(&messages.ReducerAssignment{JobId: "j", Lo: 0, Hi: 1, Children: []*messages.Pid{{Address: "a", Id: "s"}},
		ChildRanges: []int64{0, 1}}, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Step(&messages.ShardDone{}); err == nil {
		t.Fatal("a ShardDone was taken")
	}
}

func opNamed(t *testing.T, name string) kernels.Op {
	for _, op := range []kernels.Op{kernels.OpAllReduce, kernels.OpAllGather, kernels.OpReduceScatter} {
		if op.String() == name {
			return op
		}
	}
	t.Fatalf("no op %q", name)
	return 0
}

// chunkOf is the values argument as one chunk, its CRC spoiled with corrupt.
func chunkOf(t *testing.T, d *datadriven.TestData) *messages.Chunk {
	var vals []float64
	if arg, ok := d.Arg("values"); ok {
		for _, v := range arg.Vals {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				d.Fatalf(t, "value %q: %v", v, err)
			}
			vals = append(vals, f)
		}
	}
	c := chunked.Split(vals, chunked.Floats)[0]
	if d.HasArg("corrupt") {
		c.Crc ^= 1
	}
	return c
}

// stepped steps r with m and prints its Ready, an effect a line.
func stepped(t *testing.T, r *Reducer, m any) string {
	if err := r.Step(m); err != nil {
		return "error: " + err.Error()
	}
	rd := r.Ready()
	var out []string
	if c := rd.Combined; c != nil {
		out = append(out, fmt.Sprintf("combined iteration %d init %v", c.Iteration, c.Init))
	}
	for _, s := range rd.Sends {
		out = append(out, fmt.Sprintf("send %s/%s: %s", s.To.Address, s.To.Id, describe(s.Msg)))
	}
	for _, l := range rd.Logs {
		var attrs []string
		for _, a := range l.Attrs {
			attrs = append(attrs, a.String())
		}
		out = append(out, fmt.Sprintf("log %s %s %s", l.Level, l.Msg, strings.Join(attrs, " ")))
	}
	if rd.Stopped {
		out = append(out, "stopped")
	}
	if len(out) == 0 {
		return "(nothing)"
	}
	return strings.Join(out, "\n")
}

// describe is a one-line account of a message a reducer sends.
func describe(msg any) string {
	switch m := msg.(type) {
	case *messages.Partial:
		return fmt.Sprintf("Partial epoch %d seq %d %s [%d,%d) values %v", m.Epoch, m.Seq, kernels.Op(m.Op), m.Lo, m.Hi, m.Chunk.Values)
	case *messages.Reduced:
		return fmt.Sprintf("Reduced epoch %d seq %d [%d,%d) values %v", m.Epoch, m.Seq, m.Lo, m.Hi, m.Chunk.Values)
	case *messages.ReducerDone:
		return fmt.Sprintf("ReducerDone epoch %d [%d,%d) level %d", m.Epoch, m.Lo, m.Hi, m.Level)
	case *messages.JobError:
		return fmt.Sprintf("JobError %s: %s", m.Kind, m.Message)
	}
	return fmt.Sprintf("%T", msg)
}
