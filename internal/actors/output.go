package actors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/report"
	"github.com/didnmf/didnmf/usererr"
)

// A job with --out-shared has its nodes write its output into a directory they share: the
// shards fill in a partial coef.npy the coordinator created for the job (and shard 0 a
// partial basis.npy, for a detached job), which the coordinator checks and renames when the
// job is done. The node never writes into a file it did not create for this job.

// sharedCoefPartial is the file the shards of a job with --out-shared write their rows of the
// coefficients into; the coordinator renames it to coef.npy when every shard has written.
func sharedCoefPartial(dir, job string) string {
	return filepath.Join(dir, ".coef.npy."+job+".partial")
}

// sharedBasisPartial is the file shard 0 of a detached job writes the basis into.
func sharedBasisPartial(dir, job string) string {
	return filepath.Join(dir, ".basis.npy."+job+".partial")
}

// prepareSharedCoef makes the job's --out-shared directory when it does not exist (as --out
// does; under the node's data roots), checks it (without a coef.npy unless the job may
// overwrite it) and creates the files the shards fill in.
func prepareSharedCoef(roots *fsroot.Roots, spec *messages.JobSpec, job string, m, n int) error {
	// A refused directory is the user's to fix, named as the front end names out_shared.
	return fsroot.User(prepareSharedFiles(roots, spec, job, m, n))
}

// prepareSharedFiles is prepareSharedCoef's work; its errors of the roots are fsroot's.
func prepareSharedFiles(roots *fsroot.Roots, spec *messages.JobSpec, job string, m, n int) error {
	if err := roots.MkdirAll("out_shared", spec.OutShared, 0o755); err != nil {
		return err
	}
	st, err := roots.Stat("out_shared", spec.OutShared)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return usererr.Field("out_shared", "{out_shared} %s: not a directory", spec.OutShared)
	}
	if err := roots.CheckNew("out_shared", filepath.Join(spec.OutShared, "coef.npy"), spec.Overwrite); err != nil {
		return err
	}
	if spec.Detached {
		for _, name := range []string{"basis.npy", "report.json"} {
			if err := roots.CheckNew("out_shared", filepath.Join(spec.OutShared, name), spec.Overwrite); err != nil {
				return err
			}
		}
	}
	if err := prepareNPY(roots, sharedCoefPartial(spec.OutShared, job), n, int(spec.Rank)); err != nil {
		return err
	}
	if spec.Detached {
		return prepareNPY(roots, sharedBasisPartial(spec.OutShared, job), m, int(spec.Rank))
	}
	return nil
}

// removePartials removes a failed job's partial output files.
func removePartials(roots *fsroot.Roots, dir, job string) {
	_ = roots.Remove("out_shared", sharedCoefPartial(dir, job))
	_ = roots.Remove("out_shared", sharedBasisPartial(dir, job))
}

// prepareNPY creates a rows x cols .npy file under the roots for shards to fill in.
func prepareNPY(roots *fsroot.Roots, path string, rows, cols int) error {
	f, err := roots.CreateExclusive("out_shared", path, 0o644)
	if err != nil {
		return err
	}
	err = matio.PrepareNPYRows(f, rows, cols)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return usererr.Field("out_shared", "{out_shared}: preparing %s: %v", filepath.Base(path), err)
	}
	return nil
}

// commitOutput puts a finished job's output files in place (jobctl's Commit): the shared
// coef.npy, and for a detached job basis.npy and report.json.
func (c *coordinator) commitOutput(cm *jobctl.Commit) error {
	res := cm.Result
	if err := c.commitNPY(sharedCoefPartial(cm.Dir, c.job), filepath.Join(cm.Dir, "coef.npy"), int(res.N)); err != nil {
		return err
	}
	if cm.Detached {
		return c.commitDetached(cm.Dir, res)
	}
	return nil
}

// commitDetached puts a detached job's basis.npy in place and writes its report.json: the
// report a client writes (package report), with what the coordinator knows of how it ran.
func (c *coordinator) commitDetached(dir string, res *messages.JobResult) error {
	if err := c.commitNPY(sharedBasisPartial(dir, c.job), filepath.Join(dir, "basis.npy"), int(res.M)); err != nil {
		return err
	}
	r := resultOf(c.job, res)
	rep := report.Build(c.spec, &report.Run{Result: r.Result, Threads: r.Threads, Storage: r.Storage, XBytes: r.XBytes, OnActors: true,
		ShardNodes: r.ShardNodes, Checkpoints: r.Checkpoints, Recoveries: r.Recoveries,
		MessagesPerIteration: r.MessagesPerIteration, BytesPerIteration: r.BytesPerIteration, ReductionsPerIteration: r.ReductionsPerIteration})
	if c.spec.Ingest == jobspec.IngestShared {
		// As the client of an attached job says it: the images' shape, when the inputs are
		// IDX image files (read through the node's roots, headers only).
		if h, w, ok := matio.PeekImageShapeWith(c.node.cfg.Roots.Opener("input"), c.spec.Inputs); ok && h*w == r.M {
			rep.ImageShape = []int{h, w}
		}
	}
	var buf bytes.Buffer
	if err := rep.Write(&buf); err != nil {
		return err
	}
	roots, tmp := c.node.cfg.Roots, filepath.Join(dir, ".report.json."+c.job+".partial")
	w, err := roots.CreateExclusive("out_shared", tmp, 0o644)
	if err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = roots.Commit("out_shared", tmp, filepath.Join(dir, "report.json"), c.spec.Overwrite)
	}
	if err != nil {
		_ = roots.Remove("out_shared", tmp)
	}
	return err
}

// commitNPY checks that a partial .npy of rows x K that the shards filled in is whole and
// puts it in place under its final name.
func (c *coordinator) commitNPY(part, final string, rows int) error {
	roots := c.node.cfg.Roots
	f, err := roots.Open("out_shared", part)
	if err != nil {
		return err
	}
	err = matio.CheckNPYRows(f, rows, c.spec.Rank)
	f.Close()
	if err != nil {
		return fmt.Errorf("the shared output directory %s: %s: %v: do all nodes see the same directory?", filepath.Dir(final), filepath.Base(final), err)
	}
	return roots.Commit("out_shared", part, final, c.spec.Overwrite)
}

// ErrorFile is what a detached job that failed or was canceled writes into its --out-shared
// directory as error.json (its coordinator's node, under its data roots), so that whoever
// opens the directory sees why it holds no result.
type ErrorFile struct {
	Job   string `json:"job"`
	Owner string `json:"owner,omitempty"`
	// State is "failed" or "canceled"; Kind the error's kind ("input": the user's to fix,
	// with the Field at fault; "failure"; "canceled"; ...).
	State   string `json:"state"`
	Kind    string `json:"kind"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	// Ended is when the job ended (RFC 3339), Iteration the last one done.
	Ended       string `json:"ended"`
	Iteration   int64  `json:"iteration"`
	Coordinator string `json:"coordinator"`
}

// writeErrorFile writes a failed detached job's error.json into its --out-shared directory,
// whole or not at all, through a partial file. The directory must exist (it makes none), and
// unless overwrite (the spec's Overwrite) it never replaces a file: an error.json already there
// (the user's own, or one a job left) stays, and the error says so.
func writeErrorFile(roots *fsroot.Roots, dir, job string, rec *messages.JobInfo, overwrite bool) error {
	ef := ErrorFile{Job: job, Owner: rec.GetOwner(), State: rec.GetState().Name(), Kind: rec.GetErrorKind().Name(), Field: rec.GetErrorField(),
		Message: rec.GetError(), Ended: time.UnixMilli(rec.GetEndedUnixMs()).UTC().Format(time.RFC3339Nano), Iteration: rec.GetIteration(),
		Coordinator: rec.GetCoordinator()}
	data, err := json.MarshalIndent(ef, "", "  ")
	if err != nil {
		return err
	}
	if fi, err := roots.Stat("out_shared", dir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if !overwrite {
		if _, err := roots.Stat("out_shared", filepath.Join(dir, "error.json")); err == nil {
			return fmt.Errorf("%s already exists (an overwrite job may replace it)", filepath.Join(dir, "error.json"))
		}
	}
	tmp := filepath.Join(dir, ".error.json."+job+".partial")
	w, err := roots.CreateExclusive("out_shared", tmp, 0o644)
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = roots.Commit("out_shared", tmp, filepath.Join(dir, "error.json"), overwrite)
	}
	if err != nil {
		_ = roots.Remove("out_shared", tmp)
	}
	return err
}

// removeStaleErrorFile removes the error.json in a job's --out-shared directory once an
// overwrite job committed its outputs there: the job replaced the directory's results, so a
// failure an earlier job recorded there no longer describes them.
func removeStaleErrorFile(roots *fsroot.Roots, dir string) error {
	err := roots.Remove("out_shared", filepath.Join(dir, "error.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
