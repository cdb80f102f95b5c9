package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/didnmf/didnmf/kernels"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/pki"
	"github.com/didnmf/didnmf/usererr"
)

// gossipKeyEnv is the environment variable that may hold the gossip key of a member instead
// of --gossip-key-file. No flag takes the key itself: other users can read a command line.
const gossipKeyEnv = "DIDNMF_GOSSIP_KEY"

// maxGossipKeyFile bounds what --gossip-key-file reads.
const maxGossipKeyFile = 4096

// securityFlags are the flags of everything that talks to a cluster: members (serve, see
// registerMember) and clients (register).
type securityFlags struct {
	member                 bool // the flags of a member: it gossips, and takes the gossip key
	gossipKeyFile          string
	tlsCert, tlsKey, tlsCA string
	secretFile             string
	insecure               bool
}

// creds are a party's credentials as the flags give them: certificate files (tls), or else the
// cluster secret; or none with insecure.
type creds struct {
	gossipKey []byte
	tls       *pki.Config
	secret    []byte
	insecure  bool
}

// register adds the flags of a client: its credentials (a client takes no part in the
// gossip, and needs no gossip key).
func (f *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.secretFile, "secret-file", "", "the cluster secret `FILE` (default: $"+pki.SecretFileEnv+", else "+pki.DefaultSecretPath()+"); serve makes it, mode 0600, when missing; every node and client of the cluster needs it, unless they use --tls-*")
	if f.member {
		fs.StringVar(&f.tlsCert, "tls-cert", "", "this node's peer certificate `FILE` (PEM) for mutual TLS with the cluster's nodes and clients; the node takes the certificate's name (see didnmf certs)")
		fs.StringVar(&f.tlsKey, "tls-key", "", "this node's private key `FILE` (PEM)")
		fs.StringVar(&f.tlsCA, "tls-ca", "", "the cluster's CA certificate `FILE` (PEM): only nodes and clients it signed are accepted")
	} else {
		fs.StringVar(&f.tlsCert, "tls-cert", "", "this client's certificate `FILE` (PEM) for mutual TLS with the cluster's nodes (didnmf certs --client); its name is the owner of the jobs it submits")
		fs.StringVar(&f.tlsKey, "tls-key", "", "this client's private key `FILE` (PEM)")
		fs.StringVar(&f.tlsCA, "tls-ca", "", "the cluster's CA certificate `FILE` (PEM): the nodes' certificates must be signed by it")
	}
	fs.BoolVar(&f.insecure, "insecure", false, "run without authentication or encryption: anyone who reaches the ports is a peer (only on a network where everyone is trusted)")
}

// registerMember adds the flags of a member: a client's, and the gossip key's file.
func (f *securityFlags) registerMember(fs *flag.FlagSet) {
	f.member = true
	f.register(fs)
	fs.StringVar(&f.gossipKeyFile, "gossip-key-file", "", "encrypt the gossip with the key in this `FILE` (16, 24 or 32 bytes, base64 or hex), which only this user may read (chmod 600); or set $"+gossipKeyEnv+" (not both); every member needs the same key (clients none)")
}

// credentials reads the party's credentials: the TLS files when given, else the cluster
// secret, which serve makes when it is missing (create) and clients need to find.
func (f *securityFlags) credentials(stderr io.Writer, create bool) (creds, error) {
	key, tls, err := f.load()
	if err != nil {
		return creds{}, err
	}
	c := creds{gossipKey: key, tls: tls, insecure: f.insecure}
	if f.insecure {
		fmt.Fprintln(stderr, "didnmf: warning: --insecure: no authentication and no encryption; anyone who reaches these ports can run, read and cancel jobs and stop nodes")
		return c, nil
	}
	if tls != nil {
		return c, nil
	}
	path := f.secretFile
	if path == "" {
		path = pki.DefaultSecretPath()
	}
	if create {
		var made bool
		if c.secret, made, err = pki.LoadOrCreateSecret(path); err != nil {
			return creds{}, badInput("--secret-file: %v", err)
		}
		if made {
			fmt.Fprintf(stderr, "didnmf: made a new cluster secret in %s (mode 0600): local nodes and clients find it there; give it to the nodes and clients of other machines (--secret-file)\n", path)
		}
		return c, nil
	}
	if c.secret, err = pki.LoadSecret(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return creds{}, badInput("no cluster secret in %s: start a node first (didnmf serve makes one), or give --secret-file FILE or --tls-cert, --tls-key and --tls-ca", path)
		}
		return creds{}, badInput("--secret-file: %v", err)
	}
	return c, nil
}

// load reads a member's gossip key (from --gossip-key-file or $DIDNMF_GOSSIP_KEY) and the
// TLS files.
func (f *securityFlags) load() ([]byte, *pki.Config, error) {
	key, err := f.gossipKey()
	if err != nil {
		return nil, nil, err
	}
	n := 0
	for _, v := range []string{f.tlsCert, f.tlsKey, f.tlsCA} {
		if v != "" {
			n++
		}
	}
	if n == 0 {
		return key, nil, nil
	}
	if n != 3 {
		return nil, nil, badInput("mutual TLS needs all three of --tls-cert, --tls-key and --tls-ca")
	}
	tls, err := pki.Load(f.tlsCert, f.tlsKey, f.tlsCA)
	if err != nil {
		return nil, nil, badInput("%v", err)
	}
	return key, tls, nil
}

// serveMaxJobTime is serve's default --max-job-time: a day, long enough for any job this
// runtime is for, short enough that a job nobody watches does not hold a cluster for good.
const serveMaxJobTime = 24 * time.Hour

// gossipKey reads a member's gossip key: from --gossip-key-file (a file only this user may
// read) or $DIDNMF_GOSSIP_KEY, refusing both; nil when neither is given, and always for a
// client.
func (f *securityFlags) gossipKey() ([]byte, error) {
	if !f.member {
		return nil, nil
	}
	s, from := os.Getenv(gossipKeyEnv), "$"+gossipKeyEnv
	if f.gossipKeyFile != "" && s != "" {
		// Two keys, perhaps different: neither silently wins.
		return nil, badInput("both --gossip-key-file and $%s give a gossip key: give one (unset $%s, or drop --gossip-key-file)", gossipKeyEnv, gossipKeyEnv)
	}
	if f.gossipKeyFile != "" {
		b, err := pki.ReadPrivateFile(f.gossipKeyFile, "gossip key file", maxGossipKeyFile)
		if err != nil {
			return nil, badInput("--gossip-key-file: %v", err)
		}
		s, from = string(b), "--gossip-key-file "+f.gossipKeyFile
	}
	if s == "" {
		return nil, nil
	}
	key, err := cluster.ParseKey(strings.TrimSpace(s))
	if err != nil {
		return nil, badInput("%s: %v", from, err)
	}
	return key, nil
}

// certName is the common name of the party's certificate; empty without one.
func certName(c *pki.Config) string {
	if c == nil {
		return ""
	}
	return c.Name
}

// cmdServe runs a member node until SIGINT or SIGTERM, then leaves the cluster gracefully.
func cmdServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	bind := fs.String("bind", "127.0.0.1:7946", "gossip address `IP:PORT` (port 0 picks a free one); the actor remote listens on the same IP")
	actorPort := fs.Int("actor-port", 0, "actor (gRPC) `PORT` (0 picks a free one; it is advertised in the gossip)")
	dataPort := fs.Int("data-port", 0, "`PORT` of the data plane, mutual TLS like the actor port, that carries the collectives' partials and results between nodes (0 picks a free one, told to peers; -1: none, they take the actor port)")
	join := fs.String("join", "", "comma-separated gossip addresses `IP:PORT,...` of members to join (empty: start a new cluster)")
	joinWait := new(time.Duration)
	durationFlag(fs, joinWait, "join-wait", serveJoinWait, "how long to keep trying, a `DURATION` (e.g. 5m), while nothing answers at any --join address (not started yet, not reached); 0 tries once. A member that answers and refuses this node fails the start at once")
	name := fs.String("name", "", "unique node `NAME` (default: the common name in --tls-cert, else derived from the address)")
	dataDir := fs.String("data-dir", "", "the node's own `DIR` (created and locked; default: didnmf-data/NAME under the working directory)")
	capacity := fs.Int("capacity", 1, "placement weight `N`: a node with capacity 2 gets about twice the shards of one with 1")
	memory := fs.String("memory", "", "bytes of job data this node accepts, e.g. 8GiB (default: 80% of the available memory)")
	logFormat := fs.String("log-format", "text", "format of the log on stderr: text (key=value) or json (one object a line, for log collectors and scripts)")
	machine := fs.String("machine", "", "`NAME` of the machine this node runs on: nodes with one name share its memory when shards are placed (default: this machine's id, /etc/machine-id)")
	threads := fs.Int("threads", 0, "worker threads (0: all cores, or all of --cpus)")
	cpus := fs.String("cpus", "", "run only on these CPUs (Linux), a `LIST` as taskset takes it, e.g. 0-3 or 0,2: for nodes that share a machine and should not share cores (default: all the process may use)")
	kernel := addKernelFlag(fs)
	quota := fs.String("checkpoint-quota", "", "cap (a `SIZE`) on the bytes of checkpoints this node keeps on disk, e.g. 2GiB (default: none); a checkpoint past it fails as on a full disk and is not committed")
	var roots stringList
	fs.Var(&roots, "data-root", "a `DIR` under which this node reads job inputs (--ingest shared, --init custom) and writes --out-shared; repeat for several (default: none, so jobs must stream their input and take their factors back)")
	maxJobTime, lease := new(time.Duration), new(time.Duration)
	durationFlag(fs, maxJobTime, "max-job-time", serveMaxJobTime, "cancel any job coordinated here that runs longer than this `DURATION` (e.g. 2h; 0: no cap), so that no job holds the cluster for good")
	durationFlag(fs, lease, "lease", actors.DefaultLease, "cancel a job coordinated here when its client sent no word for this `DURATION` (killed, cut off); jobs submitted with --detach have no lease")
	maxShards := fs.Int("max-shards", actors.DefaultMaxShards, "most shards this node holds at once; a job that would need more is refused")
	maxJobs := fs.Int("max-jobs", actors.DefaultMaxJobs, "most jobs with actors on this node at once")
	maxRestarts := fs.Int("max-restarts", actors.DefaultMaxRestarts, "restart a job's shards and reducers on this node after at most `N` panics; the next one fails the job")
	ownerJobs := fs.Int("owner-max-jobs", 0, "at most `N` jobs of one owner (the name in its client certificate) with actors on this node at once (default 0: a quarter of --max-jobs), so that one client cannot take every slot")
	ownerShards := fs.Int("owner-max-shards", 0, "at most `N` shards of one owner's jobs on this node at once (default 0: a quarter of --max-shards)")
	ownerMemory := fs.String("owner-memory", "", "bytes of job data this node accepts for one owner's jobs, a `SIZE`, e.g. 2GiB (default: three quarters of --memory)")
	ownerStreams := fs.Int("owner-max-streams", 0, "at most `N` streamed inputs of one owner's shards received by this node at once; more wait their turn (default 0: "+strconv.Itoa(actors.DefaultOwnerMaxStreams)+")")
	historyMax := fs.Int("history-max", actors.DefaultHistoryMax, "keep the records of at most `N` ended jobs coordinated here (or whose standby this node was), for didnmf jobs --all; past it the oldest record of the owner holding the most goes (0: keep none)")
	historyTime := new(time.Duration)
	durationFlag(fs, historyTime, "history-time", actors.DefaultHistoryTime, "keep an ended job's record this long, a `DURATION` (e.g. 72h)")
	chaosDelay := fs.Duration("chaos-delay", 0, "chaos drills only: every shard on this node sleeps this long at each iteration boundary, so that faults land mid-job (default 0: off)")
	var hf httpFlags
	hf.register(fs)
	var sec securityFlags
	sec.registerMember(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf serve --bind IP:PORT [--join IP:PORT,...] [--name NAME] [--data-dir DIR] [--capacity N] [flags]\n\n"+
			"runs a cluster member until SIGINT or SIGTERM: it starts a cluster, or joins one by gossip\n"+
			"(--join), takes the shards of jobs submitted with didnmf factorize --cluster, and leaves gracefully\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	mem, err := parseBytes(*memory)
	if err != nil {
		return badInput("--memory: %v", err)
	}
	quotaBytes, err := parseBytes(*quota)
	if err != nil {
		return badInput("--checkpoint-quota: %v", err)
	}
	var faults *actors.Faults
	if *chaosDelay < 0 {
		return badInput("--chaos-delay must be >= 0, got %v", *chaosDelay)
	} else if *chaosDelay > 0 {
		faults = &actors.Faults{IterationDelay: *chaosDelay}
	}
	if *capacity < 1 {
		return badInput("--capacity must be >= 1, got %d", *capacity)
	}
	if *maxRestarts < 0 {
		return badInput("--max-restarts must be >= 0, got %d", *maxRestarts)
	}
	if err := applyKernel(*kernel); err != nil {
		return err
	}
	if *threads < 0 {
		return badInput("--threads must be >= 0, got %d", *threads)
	}
	if *dataPort < -1 || *dataPort > 65535 {
		return badInput("--data-port must be a port (0 picks one) or -1 (no data plane), got %d", *dataPort)
	}
	if *maxJobTime < 0 || *lease <= 0 || *maxShards < 1 || *maxJobs < 1 {
		return badInput("--max-job-time must be >= 0, --lease > 0, --max-shards and --max-jobs >= 1")
	}
	if *historyMax < 0 || *historyTime <= 0 {
		return badInput("--history-max must be >= 0 (0: keep none), --history-time > 0")
	}
	if *historyMax == 0 {
		*historyMax = -1 // NodeConfig's "none"
	}
	if *ownerJobs < 0 || *ownerShards < 0 || *ownerStreams < 0 {
		return badInput("--owner-max-jobs, --owner-max-shards and --owner-max-streams must be >= 0 (0: the default)")
	}
	ownerMem, err := parseBytes(*ownerMemory)
	if err != nil {
		return badInput("--owner-memory: %v", err)
	}
	if *cpus != "" {
		list, err := parseCPUList(*cpus)
		if err == nil {
			err = pinToCPUs(list)
		}
		if err != nil {
			return badInput("--cpus %q: %v", *cpus, err)
		}
		runtime.GOMAXPROCS(len(list))
		if *threads == 0 {
			*threads = len(list)
		}
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	case "json":
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	default:
		return badInput("--log-format %q: want text or json", *logFormat)
	}
	// Credentials last: without a secret file they make one, which a refused command must not.
	cr, err := sec.credentials(stderr, true)
	if err != nil {
		return err
	}
	// The default data directory is named after the node: --name, else the certificate's
	// common name (server.Start names the node so), else the address.
	dir := *dataDir
	if dir == "" {
		n := *name
		// The certificate's name when it is one path element (a certificate may hold anything).
		if cn := certName(cr.tls); n == "" && cn != "" && filepath.Base(cn) == cn && cn != "." && cn != ".." {
			n = cn
		}
		if n == "" {
			n = strings.NewReplacer(":", "-", "[", "", "]", "").Replace(*bind)
		}
		dir = filepath.Join("didnmf-data", n)
	}
	logger := slog.New(handler)
	version := advertised(readBuildVersion())
	web, err := hf.open(cr, version, logger)
	if err != nil {
		return err
	}
	var observer actors.Observer
	var webURL string
	if web != nil {
		observer, webURL = web.metrics, web.url
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := startRetryingJoin(ctx, server.Config{Name: *name, Bind: *bind, Join: splitList(*join), DataRoots: roots,
		GossipKey: cr.gossipKey, TLS: cr.tls, Secret: cr.secret, Insecure: cr.insecure, Logger: logger, Version: version, HTTP: webURL,
		Node: actors.NodeConfig{Port: *actorPort, DataPort: *dataPort, DataDir: dir, Capacity: *capacity, Memory: mem, Machine: machineName(*machine),
			Threads: *threads, CheckpointQuota: quotaBytes, Faults: faults, MaxJobTime: *maxJobTime, Lease: *lease,
			MaxShards: *maxShards, MaxJobs: *maxJobs, MaxRestarts: *maxRestarts, OwnerMaxJobs: *ownerJobs, OwnerMaxShards: *ownerShards, OwnerMemory: ownerMem,
			OwnerMaxStreams: *ownerStreams, HistoryMax: *historyMax, HistoryTime: *historyTime, Observer: observer}}, *joinWait, logger)
	if err != nil {
		if web != nil {
			web.ln.Close()
		}
		return usererr.Wrap(err)
	}
	if web != nil {
		if err := web.start(srv, dir, version, logger); err != nil {
			srv.Close()
			return err
		}
		defer web.close()
	}
	logger.Info("serving", slog.String("name", srv.Name()), slog.String("gossip", srv.Gossip()), slog.String("actor", srv.Node.Address()),
		slog.String("data", dir), slog.Int("members", len(srv.Members.Workers())), slog.Group("", versionAttrs()...))
	fmt.Fprintf(stdout, "node %s serving: gossip %s, actor %s, data %s, kernels %s, %d member(s)\n", srv.Name(), srv.Gossip(), srv.Node.Address(), dir, kernels.ActiveKernelPath(), len(srv.Members.Workers()))
	if web != nil {
		// The log (which others may read) has the address. The login URL, which carries the
		// operator token, goes to stdout only when it is the terminal of whoever started the
		// node (as Jupyter prints its own): under systemd, Docker or Kubernetes stdout is a
		// log others read, and didnmf dashboard prints the URL for the secret's holder.
		logger.Info("dashboard and HTTP API", slog.String("url", web.url))
		if isTerminal(stdout) {
			fmt.Fprintf(stdout, "dashboard, HTTP API and /metrics of node %s: open\n    %s\n", srv.Name(), web.loginURL())
		} else {
			fmt.Fprintf(stdout, "dashboard, HTTP API and /metrics of node %s at %s (its login URL, with the token: didnmf dashboard --cluster %s)\n", srv.Name(), web.url, srv.Gossip())
		}
	}
	<-ctx.Done()
	logger.Info("leaving the cluster")
	if err := srv.Leave(5 * time.Second); err != nil {
		logger.Warn("leave was not acknowledged", slog.Any("error", err))
	}
	fmt.Fprintf(stdout, "node %s left\n", srv.Name())
	return nil
}

// serveJoinWait is serve's default --join-wait: long enough for the members of a cluster
// started together (a deploy recipe, a script) to come up in any order.
const serveJoinWait = time.Minute

// startRetryingJoin starts the member of cfg; while the start fails because nothing answered
// at any of cfg.Join's addresses (cluster.JoinError.Unreached: not listening yet, not reached),
// it tries again, after 1, 2, 4, then every 5 seconds, until wait has passed since the first
// try or ctx ends (SIGINT, SIGTERM), and then returns the last error. Any other failure (a
// member that answers and refuses this node, a name taken, a port in use) is returned at
// once. Each retry is logged.
func startRetryingJoin(ctx context.Context, cfg server.Config, wait time.Duration, logger *slog.Logger) (*server.Server, error) {
	deadline := time.Now().Add(wait)
	delay := time.Second
	for {
		srv, err := server.Start(cfg)
		var je *cluster.JoinError
		if err == nil || !errors.As(err, &je) || je.Unreached == nil {
			return srv, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w (tried for %v: --join-wait)", err, wait)
		}
		pause := min(delay, left)
		logger.Warn("no member answered at --join; trying again", slog.Duration("in", pause), slog.Duration("left", left), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseBytes parses a size like 512MiB, 8GB, 1e9 or 1048576 (empty: 0).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || v*mult > 1<<62 {
		return 0, fmt.Errorf("%q is not a size (e.g. 512MiB, 8GiB)", s)
	}
	return int64(v * mult), nil
}

// machineName is --machine, or this machine's id when it is not given.
func machineName(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return server.MachineID()
}
