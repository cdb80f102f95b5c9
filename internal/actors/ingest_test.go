package actors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// writeMTX writes an n x m coordinate MatrixMarket file with about density of entries set.
func writeMTX(t *testing.T, path string, n, m int, density float64, negativeAt int) {
	t.Helper()
	var b strings.Builder
	var lines []string
	state := uint64(12345)
	for i := 1; i <= n; i++ {
		for j := 1; j <= m; j++ {
			state = state*6364136223846793005 + 1442695040888963407
			if float64(state>>11)/float64(1<<53) < density {
				v := float64(state>>40%1000)/100 + 0.01
				if len(lines) == negativeAt {
					v = -v
				}
				lines = append(lines, fmt.Sprintf("%d %d %g", i, j, v))
			}
		}
	}
	fmt.Fprintf(&b, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n%s\n", n, m, len(lines), strings.Join(lines, "\n"))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeNPYFile(t *testing.T, path, spec string) {
	t.Helper()
	src, err := matio.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	blk, err := src.Read(0, src.Samples(), matio.LayoutDense)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, n := blk.Dims()
	// The dense block is M x N column-major: the N x M row-major matrix of the file.
	if err := matio.WriteNPY(f, n, m, kernels.ToDense(blk).Data); err != nil {
		t.Fatal(err)
	}
}

// TestStreamedIngestIsBitwise streams each shard its block from the client (dense and sparse
// natural layouts, every requested layout, blocks of many chunks) and gets the driver's bits.
func TestStreamedIngestIsBitwise(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	dir := t.TempDir()
	mtx := filepath.Join(dir, "x.mtx")
	writeMTX(t, mtx, 900, 40, 0.2, -1)
	npy := filepath.Join(dir, "x.npy")
	// 3000 features: a read is 43 samples, so a shard's block comes in about 10 chunks, more
	// than the window.
	writeNPYFile(t, npy, "synthetic:m=3000,n=1200,k=3,seed=2")
	for _, c := range []struct {
		name, input string
		layout      messages.Layout
	}{
		{"mtx auto", mtx, messages.Layout_LAYOUT_AUTO}, {"mtx dense", mtx, messages.Layout_LAYOUT_DENSE}, {"mtx sparse", mtx, messages.Layout_LAYOUT_SPARSE},
		{"npy auto", npy, messages.Layout_LAYOUT_AUTO}, {"npy sparse", npy, messages.Layout_LAYOUT_SPARSE},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := spec(c.input, "did", 3, 4, lc.Addresses(), 6)
			s.Layout = c.layout
			want := driverRun(t, s)
			s.Ingest = messages.Ingest_INGEST_STREAM
			got, err := runJob(t, cl, s)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, c.name, got, want)
		})
	}
}

// TestStreamedIngestBadData: a bad value in a streamed file fails the job as an input error
// that names the file, the sample, the feature and the value, and stops the job's actors: a
// .mtx is checked when the client opens it, a .npy while the client streams it to a shard.
func TestStreamedIngestBadData(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	dir := t.TempDir()
	mtx := filepath.Join(dir, "bad.mtx")
	writeMTX(t, mtx, 300, 10, 0.3, 500)
	npy := filepath.Join(dir, "bad.npy")
	data := make([]float64, 300*10)
	for i := range data {
		data[i] = float64(i%7) + 0.5
	}
	data[250*10+3] = -2.5 // sample 250, feature 3: in the last shard's block
	f, err := os.Create(npy)
	if err != nil {
		t.Fatal(err)
	}
	if err := matio.WriteNPY(f, 300, 10, data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct{ input, want string }{
		{mtx, "bad.mtx"},
		{npy, "bad.npy: sample 250, feature 3"},
	} {
		s := spec(c.input, "did", 2, 3, lc.Addresses(), 5)
		s.Ingest = messages.Ingest_INGEST_STREAM
		_, err := runJob(t, cl, s)
		var je *JobError
		if !errors.As(err, &je) || je.Kind != KindInput || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "negative") {
			t.Fatalf("got %v, want an input error naming %q and the negative value", err, c.want)
		}
		t.Logf("error: %v", err)
		waitIdle(t, lc)
	}
}

// chunkCounter is a stand-in shard that counts the chunks it gets and acknowledges only when
// told to.
type chunkCounter struct {
	got, last, count *atomic.Int64
}

func (c chunkCounter) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.BlockChunk); ok {
		c.got.Add(1)
		c.last.Store(m.Chunk.GetSeq())
		c.count.Store(m.Chunk.GetCount())
	}
}

// TestStreamFlowControl: the client keeps at most blockWindow chunks of a block in flight
// until the shard acknowledges them, so a large input never sits in the client's buffers; an
// acknowledgement of a chunk not sent gives no credit; and the block comes in as many chunks
// as the first one announced, also when one sample is more than a chunk.
func TestStreamFlowControl(t *testing.T) {
	lc, cl := testCluster(t, 2, nil)
	for _, c := range []struct {
		name, input string
		samples     int64
		chunks      int64
	}{
		{"a read is 6 samples", "synthetic:m=20000,n=200,k=3,seed=2", 200, 34},
		{"a sample is 2 chunks", fmt.Sprintf("synthetic:m=%d,n=3,k=2,seed=2", chunked.Floats+1), 3, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			npy := filepath.Join(t.TempDir(), "x.npy")
			writeNPYFile(t, npy, c.input)
			s := spec(npy, "did", 2, 1, nil, 1)
			s.Ingest = messages.Ingest_INGEST_STREAM
			streams, err := openStreams(s)
			if err != nil {
				t.Fatal(err)
			}
			defer streams.close()
			var got, last, count atomic.Int64
			shard := lc.Nodes[1].System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return chunkCounter{&got, &last, &count} }))
			defer lc.Nodes[1].System().Root.Stop(shard)
			req := &messages.BlockRequest{JobId: "flow", Epoch: 1, Shard: 0, ColLo: 0, ColHi: c.samples, ShardPid: wirePid(shard)}
			if err := streams.request(lc.Nodes[0].System(), cl.pid, req, ""); err != nil {
				t.Fatal(err)
			}
			settle := func(want int64) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for got.Load() < want && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				time.Sleep(200 * time.Millisecond) // nothing more may come
				if g := got.Load(); g != want {
					t.Fatalf("%d chunks arrived, want %d", g, want)
				}
			}
			settle(min(c.chunks, blockWindow))
			streams.ack(&messages.BlockAck{JobId: "flow", Shard: 0, Seq: 1}) // two acknowledged: two more
			settle(min(c.chunks, blockWindow+2))
			streams.ack(&messages.BlockAck{JobId: "flow", Shard: 0, Seq: 1000}) // not sent yet: no credit
			settle(min(c.chunks, blockWindow+2))
			// Acknowledged as a shard does, chunk by chunk: the rest flows.
			deadline := time.Now().Add(10 * time.Second)
			for got.Load() < c.chunks && time.Now().Before(deadline) {
				streams.ack(&messages.BlockAck{JobId: "flow", Shard: 0, Seq: last.Load()})
				time.Sleep(5 * time.Millisecond)
			}
			settle(c.chunks)
			if last.Load() != c.chunks-1 || count.Load() != c.chunks {
				t.Fatalf("the last chunk was chunk %d of %d, want %d of %d", last.Load(), count.Load(), c.chunks-1, c.chunks)
			}
		})
	}
}

func TestShardFootprint(t *testing.T) {
	const m, cols, k = 100, 1000, 4
	rest := int64(shardOverhead + 8*4*cols*k + 8*8*m*k + 8*4*k*k)
	for _, c := range []struct {
		name    string
		density float64
		layout  matio.Layout
		x       int64
	}{
		{"dense input", 0, matio.LayoutAuto, 8 * m * cols},
		{"sparse input, auto", 0.1, matio.LayoutAuto, 12*m*cols/10 + 8*(cols+1)},
		{"sparse input, dense layout", 0.1, matio.LayoutDense, 8 * m * cols},
		{"dense enough for auto to pick dense", 0.9, matio.LayoutAuto, 8 * m * cols},
		{"dense enough, sparse layout", 0.9, matio.LayoutSparse, int64(12*0.9*m*cols) + 8*(cols+1)},
	} {
		if got := shardFootprint(m, cols, k, c.density, c.layout); got != c.x+rest {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.x+rest)
		}
	}
}
