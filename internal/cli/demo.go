package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/pki"
	"github.com/didnmf/didnmf/report"
)

// demoRoots are the directories the demo's nodes may read inputs from: Fashion-MNIST's, and
// those of the inputs given on the command line.
func demoRoots(args []string) []string {
	var roots []string
	if _, err := os.Stat(fashionDir); err == nil {
		roots = append(roots, fashionDir)
	}
	for i, a := range args {
		var in string
		switch {
		case (a == "--input" || a == "-input") && i+1 < len(args):
			in = args[i+1]
		case strings.HasPrefix(a, "--input=") || strings.HasPrefix(a, "-input="):
			in = a[strings.Index(a, "=")+1:]
		}
		if in != "" && !matio.IsSynthetic(in) {
			if abs, err := filepath.Abs(in); err == nil && !slices.Contains(roots, filepath.Dir(abs)) {
				roots = append(roots, filepath.Dir(abs))
			}
		}
	}
	return roots
}

// demoMaxJobTime caps any job on the demo cluster (serve --max-job-time).
const demoMaxJobTime = 30 * time.Minute

// fashionDir is where Debian's dataset-fashion-mnist package puts the images.
const fashionDir = "/usr/share/datasets/fashion-mnist"

// cmdDemo factorizes a default input with progress and a summary: Fashion-MNIST's 70,000
// images (K=10, k-means init as in the DID paper) when the Debian package is installed, a
// synthetic 1,000,000 x 5 matrix of rank 3 otherwise, on a cluster of three nodes started in
// this process that find each other by gossip and talk over gRPC on loopback; the job is
// submitted by a client that asks a member for the cluster as factorize --cluster does. Any factorize flag
// overrides the defaults (--nodes N: N actor systems without gossip; --nodes 0: no actors).
func cmdDemo(args []string, stdout, stderr io.Writer) error {
	// The arguments are factorize's flags: they are parsed before anything starts, so that -h
	// and a bad flag end here.
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	registerFactorize(fs, new(jobFlags))
	stay := fs.Bool("stay", false, "")
	fs.Usage = func() { demoUsage(fs.Output()) }
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { // demo's own flag, not factorize's
		return strings.TrimLeft(a, "-") == "stay" || strings.HasPrefix(strings.TrimLeft(a, "-"), "stay=")
	})
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var defaults []string
	var ref *peerReference
	fashion := fashionDir + "/train-images-idx3-ubyte.gz"
	if _, err := os.Stat(fashion); err == nil && !given["input"] {
		defaults = append(defaults, "--input", fashion, "--input", fashionDir+"/t10k-images-idx3-ubyte.gz",
			"--rank", "10", "--init", "kmeans", "--shards", "4")
		fmt.Fprintf(stderr, "demo: Fashion-MNIST from %s, 70000 images of 28x28, rank 10, DID on 4 shards on a 3-node cluster on loopback (gossip + gRPC)\n", fashionDir)
		ref = &fashionReference
	} else if !given["input"] {
		defaults = append(defaults, "--input", "synthetic:m=5,n=1000000,k=3,seed=1", "--rank", "3", "--shards", "4")
		fmt.Fprintln(stderr, "demo: synthetic 1,000,000 samples x 5 features of rank 3 (install Debian's dataset-fashion-mnist for real images), DID on 4 shards on a 3-node cluster on loopback (gossip + gRPC)")
		ref = &syntheticReference
	}
	if given["rank"] {
		ref = nil // the reference is for the default rank
	}
	if !given["plots"] {
		defaults = append(defaults, "--plots")
	}
	names := map[string]string{} // actor address -> node name
	if !given["nodes"] && !given["cluster"] {
		addr, secretFile, nodes, stop, err := startDemoCluster(3, demoRoots(args), stderr)
		if err != nil {
			return err
		}
		defer stop()
		names = nodes
		defaults = append(defaults, "--cluster", addr, "--secret-file", secretFile)
	}
	out := fs.Lookup("out").Value.String()
	if !given["out"] {
		dir, err := os.MkdirTemp("", "didnmf-demo-")
		if err != nil {
			return err
		}
		out = dir
		defaults = append(defaults, "--out", dir)
	}
	if err := cmdFactorize(append(defaults, args...), stdout, stderr); err != nil {
		return err
	}
	if err := demoSummary(stderr, out, names, ref); err != nil {
		return err
	}
	if *stay && !given["nodes"] && !given["cluster"] {
		fmt.Fprintln(stderr, "demo: the cluster stays up for its dashboard (the login URL printed above; the job is listed as ended, with its pictures and outputs): Ctrl-C stops it")
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		<-ctx.Done()
	}
	return nil
}

// peerReference is what scikit-learn's NMF with its defaults reached on a demo input, measured
// on the machine of BENCHMARKS.md ("Stopping").
type peerReference struct {
	relErr2, seconds float64
	iterations       int
}

var (
	// fashionReference: NMF(n_components=10) on the 70000 x 784 images, scikit-learn 1.2.1,
	// 2 threads: init nndsvda, solver cd, tol 1e-4.
	fashionReference = peerReference{relErr2: 0.1292, seconds: 8.37, iterations: 48}
	// syntheticReference: NMF(n_components=3) on synthetic:m=5,n=1000000,k=3,seed=1.
	syntheticReference = peerReference{relErr2: 9.9e-6, seconds: 4.30, iterations: 148}
)

// demoSummary tells in one screen what the demo did: where the shards ran, how long reading,
// initialising and iterating took, the error beside scikit-learn's, where the results and
// pictures are, and what to try next.
func demoSummary(w io.Writer, out string, names map[string]string, ref *peerReference) error {
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		return err
	}
	var rep report.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %v", filepath.Join(out, "report.json"), err)
	}
	fmt.Fprintln(w, "\nwhat the demo did:")
	where := fmt.Sprintf("in this process (%d thread(s))", rep.Threads)
	if len(rep.ShardNodes) > 0 {
		count := map[string]int{}
		var order []string
		for _, a := range rep.ShardNodes {
			if count[a] == 0 {
				order = append(order, a)
			}
			count[a]++
		}
		slices.SortFunc(order, func(a, b string) int { return strings.Compare(nameOr(names, a), nameOr(names, b)) })
		var parts []string
		for _, a := range order {
			parts = append(parts, fmt.Sprintf("%s %d", nameOr(names, a), count[a]))
		}
		where = fmt.Sprintf("on %d node(s), shards per node: %s", len(order), strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "  ran        %s, rank %d, %d shard(s) %s\n", strings.ToUpper(rep.Algo), rep.K, rep.Shards, where)
	fmt.Fprintf(w, "  data       %d samples x %d features (%s)\n", rep.N, rep.M, strings.Join(rep.Input, " + "))
	fmt.Fprintf(w, "  time       %s initialising (the nodes read their shards), %d iterations in %s (%s it/s)\n",
		secondsText(rep.InitSeconds), rep.Iterations, secondsText(rep.IterateSeconds), rateText(rate(rep.Iterations, rep.IterateSeconds)))
	fmt.Fprintf(w, "  stopped    %s\n", rep.Stop)
	fmt.Fprintf(w, "  error      rel_err2 %.4g (||X - WH||^2 / ||X||^2), RMSE %.4g\n", rep.RelErr2, rep.RMSE)
	if ref != nil {
		fmt.Fprintf(w, "             scikit-learn's NMF with its defaults: rel_err2 %.4g after %d iterations in %s (BENCHMARKS.md)\n",
			ref.relErr2, ref.iterations, secondsText(ref.seconds))
	}
	fmt.Fprintf(w, "  results    %s: basis.npy (features x K), coef.npy (samples x K), report.json, basis.tsv and top_features.tsv (named)\n", out)
	if pics := demoPictures(out); len(pics) > 0 {
		fmt.Fprintf(w, "  pictures   %s\n", strings.Join(pics, ", "))
	}
	fmt.Fprintf(w, "  next       didnmf factorize --input YOUR.npy|.npz|.mtx|10x dir|store --rank K --out DIR --plots   (samples as rows; didnmf factorize -h)\n")
	return nil
}

// nameOr is the name of the node at an actor address, or the address.
func nameOr(names map[string]string, addr string) string {
	if n, ok := names[addr]; ok {
		return n
	}
	return addr
}

// demoPictures lists the PNG pictures in a result directory.
func demoPictures(dir string) []string {
	pics, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	return pics
}

// demoUsage is demo's help: what it does and the flags it gives defaults to.
func demoUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: didnmf demo [flags]\n\n"+
		"starts a cluster of 3 nodes in this process, which find each other by gossip and talk over gRPC on\n"+
		"loopback, and factorizes on it with progress, a summary and pictures: Fashion-MNIST's 70,000 images\n"+
		"(rank 10, k-means init, until the error stops falling) when %s\n"+
		"has them, else a synthetic 1,000,000 x 5 matrix of rank 3. The cluster stops when the job ends;\n"+
		"the results and pictures stay in --out.\n\n"+
		"flags (any flag of didnmf factorize is taken too and overrides the demo's default; see didnmf factorize -h):\n", fashionDir)
	h := flag.NewFlagSet("demo", flag.ContinueOnError)
	h.SetOutput(w)
	h.String("input", "", "input `PATH` or synthetic spec (default: Fashion-MNIST's train and t10k images, else synthetic:m=5,n=1000000,k=3,seed=1)")
	h.String("rank", "", "rank `K` (default: 10 for Fashion-MNIST, else 3)")
	h.String("shards", "", "number of shards `P` (default: 4)")
	h.String("out", "", "output `DIR` (default: a new directory didnmf-demo-* in $TMPDIR)")
	h.String("nodes", "", "run on `N` actor systems in this process without gossip instead of the 3-node cluster (0: no actors)")
	h.String("cluster", "", "run on the running cluster at `IP:PORT` instead of starting one")
	h.Bool("stay", false, "keep the demo's cluster and its dashboard up after the job, until Ctrl-C")
	h.PrintDefaults()
}

// startDemoCluster starts n member nodes in this process on loopback, joined by gossip and
// sharing one kernels pool, with a cluster secret of their own, and returns the first one's
// gossip address and the file the secret is in (for the client).
func startDemoCluster(n int, roots []string, stderr io.Writer) (string, string, map[string]string, func(), error) {
	pool := kernels.NewPool(0)
	var nodes []*server.Server
	stop := func() {
		for _, s := range nodes {
			_ = s.Leave(time.Second)
		}
		pool.Close()
	}
	dir, err := os.MkdirTemp("", "didnmf-demo-nodes-")
	if err != nil {
		return "", "", nil, nil, err
	}
	secret, secretFile := pki.NewSecret(), filepath.Join(dir, "cluster.secret")
	if err := pki.WriteSecret(secretFile, secret); err != nil {
		os.RemoveAll(dir)
		return "", "", nil, nil, err
	}
	version := advertised(readBuildVersion())
	var webs []*nodeHTTP
	stop = func() {
		for _, w := range webs {
			w.close()
		}
		for _, s := range nodes {
			_ = s.Leave(time.Second)
		}
		pool.Close()
	}
	for i := 0; i < n; i++ {
		// Every member serves its dashboard on loopback, as serve --http does.
		web, err := httpFlags{addr: "127.0.0.1:0"}.open(creds{secret: secret}, version, nil)
		if err != nil {
			stop()
			os.RemoveAll(dir)
			return "", "", nil, nil, err
		}
		cfg := server.Config{Name: fmt.Sprintf("demo-%d", i+1), Bind: "127.0.0.1:0", Secret: secret, DataRoots: roots, Version: version, HTTP: web.url,
			Node: actors.NodeConfig{Pool: pool, DataDir: filepath.Join(dir, fmt.Sprint(i+1)), MaxJobTime: demoMaxJobTime, Machine: server.MachineID(), Observer: web.metrics}}
		if i > 0 {
			cfg.Join = []string{nodes[0].Gossip()}
		}
		s, err := server.Start(cfg)
		if err == nil {
			nodes = append(nodes, s)
			err = web.start(s, cfg.Node.DataDir, version, slog.New(slog.DiscardHandler))
		} else {
			web.ln.Close()
		}
		if err != nil {
			stop()
			os.RemoveAll(dir)
			return "", "", nil, nil, err
		}
		webs = append(webs, web)
	}
	for deadline := time.Now().Add(10 * time.Second); len(nodes[0].Members.Workers()) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			os.RemoveAll(dir)
			return "", "", nil, nil, fmt.Errorf("demo: the %d nodes did not all see each other within 10 s", n)
		}
	}
	names := make([]string, n)
	byActor := map[string]string{}
	for i, s := range nodes {
		names[i] = fmt.Sprintf("%s (gossip %s, actor %s)", s.Name(), s.Gossip(), s.Node.Address())
		byActor[s.Node.Address()] = s.Name()
	}
	fmt.Fprintf(stderr, "demo: cluster up: %s\n", strings.Join(names, ", "))
	fmt.Fprintf(stderr, "demo: its dashboard (members, the job's live convergence and timeline): open\n    %s\n", webs[0].loginURL())
	return nodes[0].Gossip(), secretFile, byActor, func() {
		stop()
		os.RemoveAll(dir)
	}, nil
}
