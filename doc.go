// Package didnmf runs nonnegative matrix factorizations: X (samples x features, nonnegative)
// is approximated by coef x basis^T with coef (samples x K) and basis (features x K) both
// nonnegative, by DID (Gao & Chu, AAAI 2018) or one of the algorithms it is compared with.
// It is the one entry point that the node command, the examples and any other front end
// call; the packages below it (kernels, actors, server, jobctl, jobspec, matio) each do one
// part.
//
// # A job in three steps
//
// A job is a jobspec.Spec: the inputs, the algorithm, the rank, the shards and the rest,
// every field with the CLI's default when built by jobspec.New. Open checks it for a
// Target; a Runner runs it there; the Result holds the factors, the history and what the run
// took:
//
//	spec := jobspec.New([]string{"/data/X.mtx"}, kernels.DID, 10, 4)
//	res, err := didnmf.Run(ctx, spec, didnmf.Local(0), didnmf.Options{Progress: show})
//	if errors.Is(err, usererr.ErrUser) { ... the user's to fix: the message names the field and value }
//	_ = res.Save(dir, nil) // basis.npy, coef.npy, report.json, basis.tsv, top_features.tsv
//	_ = res.SaveWith(dir, didnmf.SaveOptions{Names: didnmf.Names{Features: genes}, CoefTSV: true})
//
// # Targets
//
// The same spec runs on three targets, to the same bits:
//
//   - Local: the in-process driver (kernels.Run), no actors;
//   - InProcess: N actor systems in this process that speak the whole protocol to each
//     other over gRPC with TLS on loopback (the shards placed round-robin): a cluster
//     without machines, for tests and for measuring the protocol;
//   - OnCluster: a running cluster (didnmf serve on each machine), which this process reaches
//     as a client through a member's front door (clients take no part in the gossip). Its nodes read the input themselves (Spec.Ingest shared: a path every node
//     sees, under its data roots) or this process streams it to them (IngestStream).
//
// Local and InProcess read the input in this process, so Open checks the job against the
// data before anything runs (the rank against the shape, the shards against the samples, a
// custom initialisation's files, the memory needed). On a cluster the nodes check it where
// they read it, and a refused job comes back as an error that wraps usererr.ErrUser.
//
// A Runner keeps its target between jobs (the in-process nodes, the cluster client): open it
// once with NewRunner to run many jobs, or call Run for one.
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
// # Errors
//
// Every entry point (this package, the CLI, a node's submit) checks a job with one check,
// jobspec.Spec.CheckOn. Errors that are the user's to fix (an unreadable input, a spec a rule
// refuses, a job a node refused) wrap usererr.ErrUser, whichever package made them:
// errors.Is(err, usererr.ErrUser), or IsInput(err). A *usererr.Error (errors.As) names the
// spec's field when it is about one, and Text names the fields as a front end calls them (the
// CLI's flags). Anything else is a failure of the run.
package didnmf
