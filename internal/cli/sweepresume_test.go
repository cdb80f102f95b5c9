package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/didnmf/didnmf/internal/buildinfo"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didnmf/didnmf/matio"
)

// resumeSweep is a small sweep for the journal's tests: 4 runs of a fraction of a second.
var resumeSweep = []string{"sweep", "--input", "synthetic:m=30,n=40,k=3,seed=1", "--ranks", "2:3", "--seeds", "2", "--max-iter", "300"}

// dirFiles is every file under dir (paths relative to it) with its bytes.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		data, err := os.ReadFile(path)
		files[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// unchangedDir fails unless dir holds the files before held, with the same bytes.
func unchangedDir(t *testing.T, dir string, before map[string]string) {
	t.Helper()
	after := dirFiles(t, dir)
	for name, data := range before {
		if got, ok := after[name]; !ok || got != data {
			t.Errorf("%s was changed or removed (present %v)", name, ok)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s was written", name)
		}
	}
}

// copyDir copies the files under src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	for name, data := range dirFiles(t, src) {
		path := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSweepRefusesKeptRuns: a sweep into an --out whose runs/ holds runs is refused without
// --resume (exit 2, saying how many and what to do) and changes nothing; with --resume it
// runs nothing again and says so.
func TestSweepRefusesKeptRuns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	if code, _, stderr := runNode(t, append(resumeSweep, "--quiet", "--out", out)...); code != 0 {
		t.Fatal(stderr)
	}
	before := dirFiles(t, out)
	code, _, stderr := runNode(t, append(resumeSweep, "--out", out)...)
	if want := "didnmf: --out " + out + " holds 4 run(s) of an earlier sweep of this job in " + filepath.Join(out, "runs") +
		": give --resume to go on from them (only the runs missing are run), or use another --out"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, %q; want exit 2 and %q", code, stderr, want)
	}
	unchangedDir(t, out, before)
	code, _, stderr = runNode(t, append(resumeSweep, "--resume", "--out", out)...)
	if code != 0 || strings.Count(stderr, ": resumed (") != 4 || !strings.Contains(stderr, "4 jobs in ") ||
		!strings.Contains(stderr, "(4 of them resumed from "+filepath.Join(out, "runs")+", not run again)") {
		t.Errorf("--resume of a finished sweep: exit %d\n%s", code, stderr)
	}
	if strings.Contains(stderr, "warning") {
		t.Errorf("--resume by the build that made the runs warns:\n%s", stderr)
	}
	rep := readSweep(t, out)
	for _, r := range rep.Runs {
		if !r.Resumed {
			t.Errorf("sweep.json: K=%d seed %d not marked resumed", r.K, r.Seed)
		}
	}
}

// TestSweepResumeOtherBuild: a sweep resumed from runs another didnmf build recorded (or one
// that did not record its build) goes on, and warns that its kept runs' bits may not be this
// build's; the builds, read from a file, are printed quoted (an escape sequence in one is not
// sent to the terminal).
func TestSweepResumeOtherBuild(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	if code, _, stderr := runNode(t, append(resumeSweep, "--quiet", "--out", out)...); code != 0 {
		t.Fatal(stderr)
	}
	path := filepath.Join(out, "runs", "journal.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	this := buildinfo.ID()
	if rep := readSweep(t, out); !slices.Equal(rep.Builds, []string{this}) {
		t.Errorf("sweep.json names builds %q, want this one's, %q", rep.Builds, this)
	}
	for _, c := range []struct {
		name, builds, want string
		report             []string // sweep.json's builds
	}{
		{"another build", `["v0.9.0 go1.22.0\u001b[2J"]`, `were made by didnmf "v0.9.0 go1.22.0\x1b[2J", and this is "`, []string{"v0.9.0 go1.22.0\x1b[2J"}},
		{"another build and this one", `["v0.9.0 go1.22.0", ` + strconv.Quote(this) + `]`,
			`were made by didnmf "v0.9.0 go1.22.0", ` + strconv.Quote(this) + `, and this is "`, []string{"v0.9.0 go1.22.0", this}},
		{"a journal without builds", ``, `were made by a didnmf that did not record its build, and this is "`, nil},
	} {
		var fp map[string]json.RawMessage
		if err := json.Unmarshal(data, &fp); err != nil {
			t.Fatal(err)
		}
		delete(fp, "builds")
		if c.builds != "" {
			fp["builds"] = json.RawMessage(c.builds)
		}
		edited, err := json.Marshal(fp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runNode(t, append(resumeSweep, "--resume", "--out", out)...)
		if code != 0 || !strings.Contains(stderr, "sweep: warning: the 4 run(s) kept in "+filepath.Join(out, "runs")+" "+c.want) ||
			!strings.Contains(stderr, "not bitwise one run in a single sitting") || strings.Contains(stderr, "\x1b") {
			t.Errorf("%s: exit %d\n%s", c.name, code, stderr)
		}
		if rep := readSweep(t, out); !slices.Equal(rep.Builds, c.report) {
			t.Errorf("%s: sweep.json names builds %q, want %q", c.name, rep.Builds, c.report)
		}
	}
}

// TestSweepResumeRefusesDamagedJournal: each damage to a journal's files is refused before
// any run, with exit status 2 and a message naming the file, what is wrong and how to go on,
// and leaves every file of --out as it was.
func TestSweepResumeRefusesDamagedJournal(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	if code, _, stderr := runNode(t, append(resumeSweep, "--quiet", "--out", base)...); code != 0 {
		t.Fatal(stderr)
	}
	const rec = "runs/k2-seed1-fold0.json"
	const basis = "runs/k2-seed1-fold0.basis.npy"
	edit := func(name, old, new string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			path := filepath.Join(dir, name)
			data := string(mustRead(t, path))
			if !strings.Contains(data, old) {
				t.Fatalf("%s does not hold %q:\n%s", name, old, data)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(data, old, new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// setBasis writes another basis and its SHA-256 into the record, as a consistent forgery.
	setBasis := func(rows, cols int) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			var buf bytes.Buffer
			if err := matio.WriteNPY(&buf, rows, cols, make([]float64, rows*cols)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, basis), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(buf.Bytes())
			path := filepath.Join(dir, rec)
			data := string(mustRead(t, path))
			i := strings.Index(data, `"basis_sha256": "`) + len(`"basis_sha256": "`)
			data = data[:i] + hex.EncodeToString(sum[:]) + data[i+64:]
			if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []string // what the message says, after "didnmf: "
	}{
		{"truncated record", func(t *testing.T, dir string) {
			path := filepath.Join(dir, rec)
			if err := os.WriteFile(path, mustRead(t, path)[:60], 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{rec + ": not a run's record (a JSON object): unexpected end of JSON input", "; remove ", rec + " to run that job again"}},
		{"another k inside", edit(rec, `"k": 2`, `"k": 3`), []string{rec + ": holds the run of K=3 seed 1 fold 0, not the K=2 seed 1 fold 0 its name says"}},
		{"another fold inside", edit(rec, `"fold": 0`, `"fold": 1`), []string{"not the K=2 seed 1 fold 0 its name says"}},
		{"another test seed", edit(rec, `"test_seed": 1`, `"test_seed": 7`), []string{rec + ": test_seed 7; the job's fold 0 holds out test seed 1"}},
		{"another m", edit(rec, `"m": 30`, `"m": 31`), []string{rec + ": m 31: a basis of 31 features; the job's input has 30"}},
		{"NaN residual", func(t *testing.T, dir string) {
			path := filepath.Join(dir, rec)
			data := string(mustRead(t, path))
			i := strings.Index(data, `"residual": `) + len(`"residual": `)
			j := i + strings.Index(data[i:], ",")
			if err := os.WriteFile(path, []byte(data[:i]+`"NaN"`+data[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{rec + ": residual NaN: want a finite number >= 0", "to run that job again"}},
		{"negative count", edit(rec, `"missing": 0`, `"missing": -3`), []string{rec + ": missing -3: want a count in [0, m x n = 1200]"}},
		{"unknown field", edit(rec, `"format": 1,`, `"format": 1, "extra": true,`), []string{rec + `: has an unknown field "extra"`}},
		{"oversized record", func(t *testing.T, dir string) {
			path := filepath.Join(dir, rec)
			data := append(mustRead(t, path), bytes.Repeat([]byte(" "), 1<<20)...)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{rec + ": is 1049", "bytes, more than a run's record may be (1048576)"}},
		{"basis of the wrong shape", setBasis(30, 3), []string{basis + ": shape 30 x 3; want features x K = 30 x 2 (the basis " + rec + " names)"}},
		{"basis transposed", setBasis(2, 30), []string{basis + ": shape 2 x 30; want features x K = 30 x 2"}},
		{"basis bytes changed", func(t *testing.T, dir string) {
			path := filepath.Join(dir, basis)
			data := mustRead(t, path)
			data[len(data)-1] ^= 0x40
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{basis + ": its SHA-256 is ", "its record says: the file, or the record, changed after the run (the basis " + rec + " names)"}},
		{"basis a directory", func(t *testing.T, dir string) {
			path := filepath.Join(dir, basis)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, []string{basis + ": is a directory, not the basis"}},
		{"basis missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, basis)); err != nil {
				t.Fatal(err)
			}
		}, []string{basis + ": is missing"}},
		{"another job's fingerprint", edit("runs/journal.json", `"algorithm": "did"`, `"algorithm": "hals"`),
			[]string{"runs holds runs of another job: its --algo was hals, this one's is did; use another --out directory or remove "}},
		{"another job's cap", edit("runs/journal.json", `"stop.max_iter": "300"`, `"stop.max_iter": "500"`),
			[]string{"runs holds runs of another job: its --max-iter was 500, this one's is 300"}},
		{"a fingerprint of a newer didnmf", edit("runs/journal.json", `"format": 1`, `"format": 2`), []string{"runs/journal.json: format 2; this didnmf reads format 1"}},
		{"no fingerprint", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "runs/journal.json")); err != nil {
				t.Fatal(err)
			}
		}, []string{"runs holds 4 run(s) but no journal.json, which says which job they are of; remove ", "(its 4 run(s) are then lost) or use another --out directory"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			copyDir(t, base, out)
			c.damage(t, out)
			before := dirFiles(t, out)
			code, _, stderr := runNode(t, append(resumeSweep, "--resume", "--out", out)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 2 || !strings.HasPrefix(lines[len(lines)-1], "didnmf: ") || strings.Contains(stderr, " iterations in ") {
				t.Errorf("exit %d, %q; want exit 2 before any run, the error last", code, stderr)
			}
			for _, want := range c.want {
				if !strings.Contains(stderr, strings.ReplaceAll(want, "runs/", filepath.Join(out, "runs")+"/")) &&
					!strings.Contains(stderr, strings.ReplaceAll(want, "runs ", filepath.Join(out, "runs")+" ")) {
					t.Errorf("the message %q does not say %q", stderr, want)
				}
			}
			unchangedDir(t, out, before)
		})
	}
}

// TestSweepResumeAfterKill: a sweep interrupted (SIGINT) says how many runs it kept and how to
// go on; resumed, and killed with SIGKILL once it kept one more run, then resumed again, it
// ends with the runs, summary and consensus bases of the same sweep never interrupted, bit
// for bit, having run only the runs missing.
func TestSweepResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills didnmf processes")
	}
	dir := t.TempDir()
	// 6 runs of about 0.2 s each, so that a signal finds the sweep between runs 1 and 6.
	job := []string{"sweep", "--input", "synthetic:m=30,n=20000,k=3,seed=1", "--ranks", "2:3", "--seeds", "3", "--tol", "0", "--stall-tol", "0",
		"--max-iter", "200"}
	whole := filepath.Join(dir, "whole")
	if code, _, stderr := runNode(t, append(job, "--quiet", "--out", whole)...); code != 0 {
		t.Fatal(stderr)
	}
	out := filepath.Join(dir, "out")
	runs := func() int {
		names, _ := filepath.Glob(filepath.Join(out, "runs", "k*-seed*-fold*.json"))
		return len(names)
	}
	// start runs the sweep as a process until runs() > after, then signals it, and returns
	// its exit error and its stderr.
	start := func(sig os.Signal, after int, extra ...string) (error, string) {
		cmd := nodeCmd(t, append(append(job, "--out", out), extra...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.After(2 * time.Minute)
		for runs() <= after {
			select {
			case err := <-exited:
				t.Fatalf("the sweep ended (%v) before it was signalled; %d runs kept:\n%s", err, runs(), stderr.String())
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("no run kept within 2 minutes:\n%s", stderr.String())
			case <-time.After(2 * time.Millisecond):
			}
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		return <-exited, stderr.String()
	}
	err, stderr := start(os.Interrupt, 0)
	var ee *exec.ExitError
	kept := runs()
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || kept < 1 ||
		!strings.Contains(stderr, "run(s) that ended are kept in "+filepath.Join(out, "runs")+": run the same command with --resume to go on from them") {
		t.Fatalf("interrupted: %v, %d runs kept:\n%s", err, kept, stderr)
	}
	err, stderr = start(syscall.SIGKILL, kept, "--resume")
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the resumed sweep was not killed: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "sweep.json")); err == nil || runs() >= 6 {
		t.Fatalf("the sweep finished before it was killed (%d runs kept); make its runs longer", runs())
	}
	if strings.Count(stderr, ": resumed (") != kept {
		t.Errorf("the first resumed sweep did not resume the %d runs kept:\n%s", kept, stderr)
	}
	t.Logf("%d runs kept after SIGINT, %d after SIGKILL", kept, runs())
	kept = runs()
	code, _, stderr := runNode(t, append(job, "--resume", "--out", out)...)
	if code != 0 || strings.Count(stderr, ": resumed (") != kept || strings.Count(stderr, " iterations in ") != 6 ||
		!strings.Contains(stderr, "6 jobs in ") {
		t.Fatalf("the last resumed sweep: exit %d, %d runs kept before:\n%s", code, kept, stderr)
	}
	if !strings.Contains(stderr, "of them resumed from") {
		t.Errorf("the summary does not say how many runs were resumed:\n%s", stderr)
	}
	// sweep.tsv: the same runs, but for their seconds (a resumed run's are its first run's).
	a := strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(out, "sweep.tsv")))), "\n")
	b := strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(whole, "sweep.tsv")))), "\n")
	if len(a) != 7 || len(a) != len(b) {
		t.Fatalf("sweep.tsv: %d lines, uninterrupted %d", len(a), len(b))
	}
	for i := range a {
		x, y := strings.Split(a[i], "\t"), strings.Split(b[i], "\t")
		x[6], y[6] = "", "" // seconds
		if strings.Join(x, "\t") != strings.Join(y, "\t") {
			t.Errorf("sweep.tsv line %d: %q, uninterrupted %q", i, a[i], b[i])
		}
	}
	sameSweep(t, out, whole)
	if ra, rb := readSweep(t, out), readSweep(t, whole); ra.Rule != rb.Rule || len(ra.PerRank) != len(rb.PerRank) {
		t.Errorf("rule %q, uninterrupted %q", ra.Rule, rb.Rule)
	} else {
		for i := range ra.PerRank {
			x, y := ra.PerRank[i], rb.PerRank[i]
			if x.TrainMean != y.TrainMean || *x.TestMean != *y.TestMean || *x.TestSE != *y.TestSE || *x.Silhouette != *y.Silhouette {
				t.Errorf("K=%d: the summary differs from the uninterrupted sweep's", x.K)
			}
			sameFiles(t, filepath.Join(out, x.Spectra), filepath.Join(whole, y.Spectra))
		}
	}
}
