package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

// cmdJobs lists the jobs running on a cluster: a client sees its own, with their progress.
func cmdJobs(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf jobs --cluster IP:PORT [flags]\n\nlists the jobs running on the cluster that you submitted (a node's credentials list all), with their progress\n\nflags:\n")
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
	jobs, errs := c.Jobs(3 * time.Second)
	for _, e := range errs {
		fmt.Fprintf(stderr, "didnmf: warning: %v\n", e)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"jobs": jobs})
	}
	return printJobs(stdout, jobs)
}

// printJobs writes a table of jobs and their progress: iteration, relative error, iterations
// a second over the last ten, and seconds since they started.
func printJobs(w io.Writer, jobs []*messages.JobInfo) error {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "no jobs")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tOWNER\tSTATE\tALGO\tRANK\tSHARDS\tITERATION\tREL_ERR2\tIT/S\tSECONDS\tDETACHED\tCOORDINATOR")
	for _, j := range jobs {
		relErr := "-"
		if j.RelErr2 > 0 {
			relErr = fmt.Sprintf("%.4g", j.RelErr2)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d/%d\t%s\t%s\t%.1f\t%v\t%s\n", j.JobId, j.Owner, j.State.Name(), j.Algorithm.Name(), j.Rank, j.Shards,
			j.Iteration, j.MaxIter, relErr, rateText(j.Rate), j.Seconds, j.Detached, j.Coordinator)
	}
	return tw.Flush()
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
