// Package didnmf runs nonnegative matrix factorizations: X (samples x features, nonnegative)
// is approximated by coef x basis^T with coef (samples x K) and basis (features x K) both
// nonnegative, by DID (Gao & Chu, AAAI 2018) or one of the algorithms it is compared with,
// in this process, on actor systems in this process, or on a cluster of machines. It is the
// one entry point: the didnmf command, the Python package and the examples all call it, and a
// Go program needs no other package of this module (kernels and matio, the numerics and the
// readers, are there for who wants them).
//
// # A job in three steps
//
// A job is a Spec: the inputs, the algorithm, the rank, the shards and the rest, every field
// with the CLI's default when made by NewSpec. Run checks it, runs it on a Target, and
// returns the Result: the factors (Basis and Coef, as gonum matrices), the history, and what
// the run took:
//
//	spec := didnmf.NewSpec([]string{"/data/X.mtx"}, didnmf.DID, 10, 4)
//	spec.Stop.MaxIter = 300
//	res, err := didnmf.Run(ctx, spec, didnmf.Local(0), didnmf.Options{Progress: show})
//	if errors.Is(err, didnmf.ErrUser) { ... the user's to fix: the message names the field and value }
//	coef := res.Coef() // samples x K
//	_ = res.Save(dir, nil) // basis.npy, coef.npy, report.json, basis.tsv, top_features.tsv
//	_ = res.SaveWith(dir, didnmf.SaveOptions{Names: didnmf.Names{Features: genes}, CoefTSV: true})
//
// Inputs are MatrixMarket (.mtx, .mtx.gz), NumPy (.npy), scipy sparse (.npz), IDX, 10x
// directories, block stores, or synthetic:m=...,n=...,k=...,seed=... matrices; several are
// stacked as more samples (see `didnmf factorize -h`).
//
// Spec, NodeConfig, ClusterConfig and Member are the runtime's own types under other names
// (aliases): their fields and methods are documented where they are defined, and go doc shows
// them there (go doc github.com/didnmf/didnmf/internal/jobspec Spec, .../internal/server
// Config, ClientConfig, Server). A program sets their fields as any struct's.
//
// # Where a job runs
//
// The same spec runs on three targets, to the same bits:
//
//   - Local: this process (kernels.Run), no actors;
//   - InProcess: N actor systems in this process that speak the whole protocol to each
//     other over gRPC with TLS on loopback (the shards placed round-robin): a cluster
//     without machines, for tests and for measuring the protocol;
//   - OnCluster: a running cluster, which this process reaches as a client through a
//     member's front door with a ClusterConfig (clients take no part in the gossip). Its
//     nodes read the input themselves (IngestShared: a path every node sees, under its data
//     roots) or this process streams it to them (IngestStream).
//
// A cluster's members run `didnmf serve`, or Serve in a Go program, from a preset with every
// limit and wait set: LANNode for machines on one network, LocalNode for members on one
// machine. Add the cluster secret (NewSecret) and the members to join:
//
//	cfg := didnmf.LANNode()
//	cfg.Secret, cfg.Join = secret, []string{"10.0.0.1:7946"}
//	member, err := didnmf.Serve(cfg)
//	...
//	res, err := didnmf.Run(ctx, spec, didnmf.OnCluster(didnmf.ClusterConfig{Cluster: []string{"10.0.0.1:7946"}, Secret: secret}), didnmf.Options{})
//
// Local and InProcess read the input in this process, so the job is checked against the data
// before anything runs (the rank against the shape, the shards against the samples, a custom
// initialisation's files, the memory needed). On a cluster the nodes check it where they read
// it, and a refused job comes back as an error that wraps ErrUser.
//
// Open checks a spec for a target once and returns the Job; a Runner keeps its target between
// jobs (the in-process nodes, the cluster client): make one with NewRunner to run many jobs,
// or call Run for one.
//
// # Following and canceling a job
//
// Options.Progress is called after every iteration with its error and timings; Options.Warn
// hears what happens to a job on actors that does not end it (a node lost, the job rolled back
// to a checkpoint). Canceling Run's context cancels the job wherever it runs. A job submitted
// detached (Spec.Detached, Runner.Submit) outlives this process and writes its outputs into
// Spec.OutShared; on a cluster, Runner.Jobs lists the jobs this client may see (JobInfo: state,
// iteration, error, rate) and Runner.Cancel cancels one by id.
//
// # Rank sweeps
//
// Runner.Sweep runs a job at every rank of a list with several seeds each, as many at once as
// the target runs (one per member on a cluster), again where a run failed for a reason that is
// not its input's, and summarizes the runs per rank (package sweep): the error's spread, the
// stability of the bases across seeds and a suggested rank. SweepResult.Save writes
// sweep.json (SweepReport), sweep.tsv, the consensus bases and the picture:
//
//	res, err := runner.Sweep(ctx, job, didnmf.SweepOptions{Ranks: []int{2, 3, 4, 5}, Seeds: 3})
//	fmt.Println(res.Suggested, res.Rule)
//	_ = res.Save(dir)
//
// With a test set (Spec.TestFraction), the sweep cross-validates: run s of a rank holds out
// fold s mod SweepOptions.Folds (test seed Spec.TestSeed + fold), the test error's standard
// error is over the folds, and res.Suggestion may say that it cannot tell (CannotTell, with
// the Reason) or that runs it rests on hit a cap (Unreliable). A sweep keeps, of each run, its
// basis, errors, stop reason, iterations and history, never its coefficients
// (SweepRun.Result.C is nil): what it holds grows with replicates x K x features.
//
// A sweep of hours survives its own process: SweepOptions.Journal keeps each run as it ends
// (SweepJournal.Record) and gives back the runs an earlier sweep of the same job kept
// (SweepJournal.Done), which are then not run again (SweepRun.Resumed). OpenSweepJournal keeps
// them in files, DIR/runs, checked as hostile when read back, and refuses the runs of another
// job; `didnmf sweep --resume` is this:
//
//	jn, err := didnmf.OpenSweepJournal(dir, job, opts) // dir/runs
//	opts.Journal = jn
//	res, err := runner.Sweep(ctx, job, opts) // killed and run again: only the runs missing run
//
// # cNMF's consensus
//
// SweepResult.Save also writes every run's basis with unit-norm columns (spectra_K.npy).
// ReadSpectra reads one rank's back from a sweep's directory, checking them as hostile;
// Spectra.Consensus drops the outliers by cNMF's local-density filter and combines the rest
// into K programs (sweep.FilteredConsensus: k-means, medians scaled to sum 1); and
// Runner.Consensus refits the input's usages against them by the transform job, distributed,
// with no samples x features dense matrix:
//
//	sp, err := didnmf.ReadSpectra(dir, 8)
//	c, err := sp.Consensus(didnmf.ConsensusOptions{Seed: sweep.ConsensusSeed})
//	res, err := runner.Consensus(ctx, job, c, filepath.Join(out, "consensus_basis.npy"), didnmf.Options{})
//
// # Errors
//
// Every entry point (this package, the CLI, a node's submit, the Python package) checks a job
// with one check. Errors that are the user's to fix (an unreadable input, a spec a rule
// refuses, a job a node refused) wrap ErrUser, whichever package made them: errors.Is(err,
// didnmf.ErrUser), or IsInput(err). A *usererr.Error (errors.As) names the spec's field when
// it is about one, and its Text names the fields as a front end calls them (the CLI's flags).
// Anything else is a failure of the run.
package didnmf
