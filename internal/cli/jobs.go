package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/didnmf/didnmf"

	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/messages"
)

// submitDetached submits a job that runs on without this client and prints its id.
func submitDetached(f *jobFlags, j *job, stdout io.Writer) error {
	defer j.Close()
	runner, err := didnmf.NewRunner(j.Target)
	if err != nil {
		return clusterErr(f.cluster, err)
	}
	defer runner.Close()
	id, err := runner.Submit(context.Background(), j.Job)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", id)
	fmt.Fprintf(f.errOut, "didnmf: job %s runs detached; it writes coef.npy, basis.npy and report.json into %s\n"+
		"  follow it:  didnmf jobs --cluster %s\n  cancel it:  didnmf cancel --cluster %s %s\n", id, f.outShared, f.cluster, f.cluster, id)
	return nil
}

// clientFlags are the flags of the commands that only talk to a cluster.
type clientFlags struct {
	cluster, bind string
	sec           securityFlags
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.cluster, "cluster", "", "gossip address `IP:PORT` of any member (comma-separated for several); tried for "+server.DefaultReach.String()+" while nothing answers")
	fs.StringVar(&c.bind, "client-bind", "", "`IP` this client listens on (default: the address that routes to the cluster)")
	c.sec.register(fs)
}

// cmdJobs lists the jobs running on a cluster (with --all, the ended ones its members still
// keep too): a client sees its own, with their progress or outcome.
func cmdJobs(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	all := fs.Bool("all", false, "list the jobs that ended too (done, failed, canceled), with why: the members keep them for a while (serve's --history-time and --history-max)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf jobs --cluster IP:PORT [--all] [flags]\n\nlists the jobs running on the cluster that you submitted (a node's credentials list all), with their progress;\nwith --all, the jobs that ended too, with their outcome and its reason\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if cf.cluster == "" {
		return badInput("--cluster is required")
	}
	c, err := connect(cf.cluster, &cf.sec, cf.bind, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	jobs, errs := c.ListJobs(&messages.ListJobs{Ended: *all}, 3*time.Second)
	for _, e := range errs {
		fmt.Fprintf(stderr, "didnmf: warning: %v\n", e)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"jobs": jobs})
	}
	return printJobs(stdout, jobs, *all)
}

// printJobs writes a table of jobs and their progress: iteration, relative error, iterations
// a second over the last ten, and seconds since they started; with all, when each ended and
// why (the stop rule that ended it, or its error).
func printJobs(w io.Writer, jobs []*messages.JobInfo, all bool) error {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "no jobs")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	header := "JOB\tOWNER\tSTATE\tALGO\tRANK\tSHARDS\tITERATION\tREL_ERR2\tIT/S\tSECONDS\tDETACHED\tCOORDINATOR"
	if all {
		header += "\tENDED\tREASON"
	}
	fmt.Fprintln(tw, header)
	for _, j := range jobs {
		relErr := "-"
		if j.RelErr2 > 0 {
			relErr = fmt.Sprintf("%.4g", j.RelErr2)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\t%s\t%.1f\t%v\t%s", j.JobId, j.Owner, j.State.Name(), j.Algorithm.Name(), j.Rank, j.Shards,
			j.Iteration, j.MaxIter, relErr, rateText(j.Rate), j.Seconds, j.Detached, j.Coordinator)
		if all {
			ended, reason := "-", "-"
			if j.EndedUnixMs != 0 {
				ended = time.UnixMilli(j.EndedUnixMs).UTC().Format(time.RFC3339)
				reason = outcome(j)
			}
			fmt.Fprintf(tw, "\t%s\t%s", ended, reason)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// outcome is why an ended job ended, on one line: the stop rule that ended it, or its error
// (its kind, the field at fault, and the message).
func outcome(j *messages.JobInfo) string {
	if j.Error == "" {
		return "stop: " + cmp.Or(j.Stop, "-")
	}
	what := j.ErrorKind.Name()
	if j.ErrorField != "" {
		what += " (" + j.ErrorField + ")"
	}
	return what + ": " + strings.Join(strings.Fields(j.Error), " ")
}

// cmdCancel cancels one of your jobs on a cluster.
func cmdCancel(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cancel", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf cancel --cluster IP:PORT JOB\n\ncancels a job you submitted (see didnmf jobs): its actors stop and its memory and checkpoints are freed on every node\n\nflags:\n")
		fs.PrintDefaults()
	}
	ids, err := parseFlagsArgs(fs, args, 1, stderr)
	if err != nil {
		return err
	}
	if cf.cluster == "" || len(ids) != 1 {
		return badInput("want --cluster IP:PORT and one job id")
	}
	c, err := connect(cf.cluster, &cf.sec, cf.bind, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	id := ids[0]
	if err := c.Cancel(id, 10*time.Second); err != nil {
		return badInput("%v", err)
	}
	fmt.Fprintf(stdout, "job %s canceled\n", id)
	return nil
}
