package didnmf

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/report"
)

// nanNPY writes a samples x features .npy of a small synthetic matrix with every 20th entry
// NaN, for --missing nan.
func nanNPY(t *testing.T, dir string) string {
	t.Helper()
	src, err := matio.Open("synthetic:m=8,n=600,k=3,seed=4,noise=0.05")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	blk, err := src.Read(0, 600, matio.LayoutDense)
	if err != nil {
		t.Fatal(err)
	}
	data := append([]float64(nil), kernels.ToDense(blk).Data...) // column-major M x N = row-major N x M
	for i := range data {
		if (i*7919)%20 == 3 {
			data[i] = math.NaN()
		}
	}
	path := filepath.Join(dir, "x-nan.npy")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := matio.WriteNPY(f, 600, 8, data); err != nil {
		t.Fatal(err)
	}
	return path
}

// reportFields returns a report as its JSON fields, without the timings (which may differ
// between runs), what depends on them on actors (the messages and bytes per iteration, which
// report batching and grants vary, and the checkpoints committed before the end), and the
// fields that name where the shards ran or wrote.
func reportFields(t *testing.T, rep *report.Report) map[string]any {
	t.Helper()
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, timing := range []string{"seconds", "read_seconds", "init_seconds", "iterate_seconds",
		"messages_per_iteration", "bytes_per_iteration", "checkpoints"} {
		delete(m, timing)
	}
	for _, where := range []string{"shard_nodes", "cluster", "coef_shared"} {
		delete(m, where)
	}
	for _, p := range m["history"].([]any) {
		delete(p.(map[string]any), "seconds")
	}
	return m
}

// actorOnly are the report fields of a run on actors that a run in this process has not:
// how it ran on them.
var actorOnly = []string{"nodes", "ingest", "checkpoint_every", "checkpoints", "recoveries",
	"messages_per_iteration", "bytes_per_iteration", "reductions_per_iteration"}

// TestReportsAgree: one penalized, masked job run in this process, attached on a cluster and
// detached on it writes the same report.json (report.Build for all three), field by field:
// only the timings and where the shards ran may differ, and the run in this process lacks
// only the fields of a run on actors. In particular the detached report (the coordinator's)
// has the penalties, the objective, the storage, bytes and threads the nodes used, and the
// floats per iteration.
func TestReportsAgree(t *testing.T) {
	dir := t.TempDir()
	spec := func() *jobspec.Spec {
		s := jobspec.New([]string{nanNPY(t, dir)}, kernels.DID, 3, 3)
		s.Stop = kernels.StopRule{MaxIter: 15}
		s.AlphaCoef, s.L1Ratio = 0.01, 0.5
		s.Missing, s.TestFraction, s.TestSeed = true, 0.1, 7
		s.CheckpointEvery = 5
		return s
	}
	local, err := Run(context.Background(), spec(), Local(0), Options{})
	if err != nil {
		t.Fatalf("in this process: %v", err)
	}
	cluster := startCluster(t, 2, dir)
	attachedSpec := spec()
	attachedSpec.OutShared = filepath.Join(dir, "attached")
	attached, err := Run(context.Background(), attachedSpec, cluster, Options{})
	if err != nil {
		t.Fatalf("attached: %v", err)
	}

	detachedSpec := spec()
	detachedSpec.OutShared, detachedSpec.Detached = filepath.Join(dir, "detached"), true
	detached := runDetached(t, cluster, detachedSpec)

	l, a, d := reportFields(t, local.Report()), reportFields(t, attached.Report()), reportFields(t, detached)
	for _, f := range []string{"alpha_coef", "l1_ratio", "objective", "x_bytes", "floats_per_iteration", "observed", "missing", "test_count", "threads"} {
		if _, ok := d[f]; !ok {
			t.Errorf("the detached report has no %s", f)
		}
	}
	if d["storage"] != "float64" && d["storage"] != "float32" {
		t.Errorf("the detached report's storage is %v, not what the nodes used", d["storage"])
	}
	compare(t, "attached", a, "detached", d)
	for _, f := range []string{"ingest", "checkpoint_every", "reductions_per_iteration"} {
		if _, ok := a[f]; !ok {
			t.Errorf("the attached report has no %s", f)
		}
	}
	for _, f := range actorOnly {
		delete(a, f)
	}
	compare(t, "in this process", l, "attached", a)
}

// runDetached submits a detached job on the cluster and returns the report.json it writes
// into its OutShared.
func runDetached(t *testing.T, cluster Target, spec *jobspec.Spec) *report.Report {
	t.Helper()
	j, err := Open(spec, cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	runner, err := NewRunner(cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	if _, err := runner.Submit(context.Background(), j); err != nil {
		t.Fatalf("detached: %v", err)
	}
	path := filepath.Join(spec.OutShared, "report.json")
	var raw []byte
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if raw, err = os.ReadFile(path); err == nil || !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("the detached job's report: %v", err)
	}
	var rep report.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

// TestDetachedReportHasTheImageShape: a detached job on IDX images says their shape in its
// report, as the client of an attached one does (didnmf plot draws the basis as images).
func TestDetachedReportHasTheImageShape(t *testing.T) {
	dir := t.TempDir()
	// 40 images of 4 x 5 unsigned bytes, uncompressed IDX.
	var raw bytes.Buffer
	binary.Write(&raw, binary.BigEndian, []uint32{0x803, 40, 4, 5})
	for i := 0; i < 40*4*5; i++ {
		raw.WriteByte(byte(1 + (i*37)%251))
	}
	input := filepath.Join(dir, "images-idx3-ubyte")
	if err := os.WriteFile(input, raw.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := jobspec.New([]string{input}, kernels.DID, 2, 2)
	spec.Stop = kernels.StopRule{MaxIter: 3}
	spec.OutShared, spec.Detached = filepath.Join(dir, "out"), true
	rep := runDetached(t, startCluster(t, 1, dir), spec)
	if !slices.Equal(rep.ImageShape, []int{4, 5}) {
		t.Errorf("image_shape %v, want [4 5]", rep.ImageShape)
	}
}

// compare reports every field in which two reports differ.
func compare(t *testing.T, aName string, a map[string]any, bName string, b map[string]any) {
	t.Helper()
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !reflect.DeepEqual(a[k], b[k]) {
			if k == "history" {
				t.Errorf("history: %s %v\n%s %v", aName, a[k], bName, b[k])
				continue
			}
			t.Errorf("%s: %s %v, %s %v", k, aName, a[k], bName, b[k])
		}
	}
}
