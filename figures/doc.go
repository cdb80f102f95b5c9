// Package figures draws the pictures of a factorization result: how the error fell, and what
// the basis looks like. It writes each picture as a PNG (for a quick look) and an SVG (for
// papers and slides), with gonum.org/v1/plot, in pure Go and without a network.
//
// # From a result directory
//
// `node factorize --out result/` writes result/basis.npy, result/coef.npy and
// result/report.json. One call draws everything from them:
//
//	written, err := figures.WriteResult("result", "", figures.Options{})
//	// written: result/convergence.png, result/convergence.svg, result/basis.png, result/basis.svg
//
// which is what `node plot --result result/` does. WriteResult reads report.json and
// basis.npy (never coef.npy, which may be huge) and writes:
//
//   - convergence.png/.svg: two panels, the relative error ||X-BC||²/||X||² (the report's
//     rel_err2; its objective_ratio in reports that lack it) on a log scale against the
//     iteration, and against the seconds since the job started. A job on actors that rolled
//     back to a checkpoint after a failure has each rollback marked: "R1→40" at iteration 40,
//     where the first rollback resumed, over the iterations it did again, and "R1" at the time
//     the failure was noticed, over the time until the job resumed.
//   - basis.png/.svg: when the features are the pixels of H x W images (the report's
//     image_shape, or Options.ImageShape, as node plot's --image-shape 28x28 gives it), the
//     K basis vectors as a grid of grayscale images, "component 1" to "component K" (as basis.tsv's headers), each
//     scaled to its own maximum. Otherwise, for each component, a bar chart of its 10 largest
//     features, named by the first column of result/basis.tsv when it holds names (factorize
//     writes them there), else by result/features.txt (one name a line, exactly m lines) if
//     there is one, else "feature j"; a name too wide for its label is cut with an ellipsis.
//
// Errors about the input, a report.json that is missing, truncated, of the wrong types or of
// impossible sizes, a basis.npy whose shape is not the report's, or an image shape that does
// not fit, name the file and the field and wrap ErrInput:
//
//	if errors.Is(err, figures.ErrInput) { ... } // the user's files, not a failure to write
//
// # One figure at a time
//
// Each picture is a Figure, made by one function from data in memory, and written by
// Figure.Save (dir/base.png and dir/base.svg), Figure.WritePNG or Figure.WriteSVG:
//
//	rep, err := figures.ReadReport("result/report.json")
//	conv, err := figures.Convergence("my run", rep.History, rep.Recoveries)
//	_, err = conv.Save("out", "convergence")
//
//	grid, err := figures.BasisGrid("faces", basis, m, k, 64, 64) // basis: m x k, row-major
//	sweepFig, err := figures.Sweep("rank sweep", summaries, figures.SweepNote{Suggested: k, Rule: rule}) // node sweep's sweep.png/.svg
//	bars, err := figures.TopFeatures("words", basis, m, k, 10, names)
//
// PNG files are drawn at 72 dots per inch, one pixel per point, so that a figure's Width and
// Height are its PNG's pixels, and BasisLayout gives where each tile of a BasisGrid lies in
// its PNG. The pictures are deterministic: the same input gives the same bytes.
//
// Figures stay readable at any size: at most MaxComponents components are drawn, a basis
// grid is at most 1600 pixels wide with tiles of 96 to 384 pixels, and long histories are
// thinned to a few thousand points. Reading is bounded too: report.json to MaxReportBytes,
// the basis to MaxBasisValues values, checked before anything is allocated for them.
//
// The package depends on matio for the .npy files and on nothing of the runtime (actors,
// server, cluster): any program can draw a result directory.
package figures
