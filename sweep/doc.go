// Package sweep chooses the rank of a factorization: from the runs of a sweep, one NMF per
// rank K and seed, it sums up each rank (its errors over the seeds, and how well the seeds'
// bases agree) and suggests a K. It is the arithmetic behind
//
//	node sweep --input X --ranks 2:30 --seeds 10 [--test-fraction 0.1]
//
// and does no I/O: the command runs the jobs and writes the files, and figures.Sweep draws
// the picture.
//
// # From runs to a rank
//
// Each finished job becomes a Run: its rank and seed, its basis (M x K, column-major, as
// kernels.Result.B) and its relative errors ||X-BC||²/||X||² on the fitted entries and, with
// a test set, on the held-out ones (NaN without):
//
//	runs = append(runs, sweep.Run{K: k, Seed: seed, M: res.M, Basis: res.B,
//		TrainRelErr2: res.RelErr2(), TestRelErr2: math.NaN(), Iterations: res.Iterations, Seconds: res.Seconds})
//
// Summarize groups them by rank, in increasing K, and Suggest picks a rank and says why:
//
//	summary, err := sweep.Summarize(runs)
//	k, rule := sweep.Suggest(summary)
//	fmt.Printf("suggested rank: %d (%s)\n", k, rule)
//	for _, s := range summary {
//		fmt.Printf("K=%d train %.4g ± %.2g, stability %.3f\n", s.K, s.Train.Mean, s.Train.SE, s.Stability.Silhouette)
//	}
//
// # Stability: consensus NMF
//
// NMF finds a different local optimum from each starting point. At a rank the data support,
// the seeds find the same components (in another order and scale); above it, they split and
// merge them differently. Consensus measures this as cNMF does (Kotliar et al., "Identifying
// gene expression programs of cell-type identity and cellular activity with single-cell
// RNA-Seq", eLife 2019): it puts the K components of all S seeds together, scales each to
// unit L2 norm, clusters the K*S vectors into K clusters with k-means, and scores the
// clustering by its silhouette, between -1 and 1, near 1 when every cluster holds the same
// component from every seed. The consensus component of each cluster is the elementwise
// median of its members (robust to a seed that went astray), scaled to unit norm:
//
//	st, err := sweep.Consensus(bases, m, k, seed) // bases: S slices of m*k
//	// st.Silhouette, st.Agreement (fraction of clusters with one component from each seed),
//	// st.Basis (m x k, column-major, largest clusters first), st.ClusterSizes, st.Labels
//
// The consensus is in the normalized space: its columns have unit L2 norm (cNMF scales its
// medians to sum 1 instead). A basis's scale is arbitrary, B·C = (B·D)(D⁻¹·C) for any
// positive diagonal D: to use the consensus as a factorization, fit the coefficients to it
// (nonnegative least squares), as cNMF does.
//
// Summarize calls Consensus for each rank with ConsensusSeed. A rank with one run has no
// stability (Silhouette and Agreement NaN), and K = 1 has no silhouette (one cluster).
//
// # Suggesting a rank
//
// Suggest uses the first of three rules the summaries allow (its documentation says why
// each): with a test set, the smallest K within one standard error of the lowest mean test
// error; else, with two seeds or more, the largest K whose silhouette is within 0.05 of the
// best; else the elbow of the train error. The rule comes back in words, with the
// numbers it used, for the report.
//
// # Determinism
//
// Everything is a function of its arguments: no map order, no clock, a seeded SplitMix64
// generator for k-means++, and parallel loops that give each output to one goroutine with
// a fixed order of summation. The same runs give the same bits, on any number of threads,
// and Summarize does not depend on the order of the runs. Every error is about the input
// and wraps usererr.ErrUser.
package sweep
