// Package bench is didnmf's benchmark harness: what `didnmf bench` measures and prints, as a
// library the command only feeds with its flags.
//
// One job, timed (Result, Report): an algorithm's seconds per iteration with the kernels'
// driver, against the two floors of one iteration on this machine (MeasureRooflines: the
// memory bandwidth to read X and C, and DID's flops at the FMA peak); optionally the same job
// on actors in the same run (TimePairs: driver and actors alternately, medians of the pairs),
// the fault-free cost of checkpoints (CheckpointOverhead), and on `didnmf serve` processes on
// loopback (StartProcs: the processes joined by gossip, the time a join and a death take to be
// seen, and ProbeAllreduce: the latency of one allreduce between them).
//
// The paper's Table 2 (RunSet, Row): every algorithm to a tolerance on the paper's synthetic
// data shapes and on Fashion-MNIST, one row each beside the paper's figures (PaperFigure).
//
// Every figure is a median (Median) over repetitions; the outputs are one JSON line per result
// or row, or text (Report.WriteText, WriteTable2Header, WriteTable2Row). The harness opens no
// job itself: the caller opens them (didnmf.Open), so that the command's flags and the
// library's runs are one job.
package bench
