package cli

// What serve --http costs a running job: the iteration time of the same job on 3 `didnmf
// serve` processes on loopback without --http and with it while a browser follows the job
// and /metrics is scraped every second (BenchmarkHTTPOverhead), and 100 progress streams on
// one node (TestHundredProgressStreams, BenchmarkHundredStreams). The benchmarks run their
// alternating runs once, whatever b.N, and report medians:
//
//	go test ./internal/cli -run '^$' -bench 'HTTPOverhead|HundredStreams' -benchtime 1x -timeout 60m -v
//
// DIDNMF_BENCH_PAIRS (default 3) sets the number of without/with pairs.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/browsertest"

	"github.com/chromedp/chromedp"

	"github.com/didnmf/didnmf/bench"
	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/proccluster"
	"github.com/didnmf/didnmf/pki"
)

// httpCluster is 3 serve processes on loopback, each with --http when web is set.
type httpCluster struct {
	nodes  []*proccluster.Node
	urls   []string // the nodes' HTTP base URLs ("" without --http)
	token  string   // the operator token
	secret []byte
}

// freeLoopbackPort returns a loopback IP:PORT nothing listens on now.
func freeLoopbackPort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startHTTPCluster starts n serve processes (the test binary as didnmf), joined to the
// first, each serving --http when web is set; they are killed at the end of the test.
func startHTTPCluster(tb testing.TB, n int, web bool) *httpCluster {
	tb.Helper()
	secret, err := pki.LoadSecret(os.Getenv(pki.SecretFileEnv))
	if err != nil {
		tb.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	c := &httpCluster{token: httpapi.OperatorToken(secret), secret: secret}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("web-%d", i+1)
		args := []string{"serve", "--bind", "127.0.0.1:0", "--name", name, "--data-dir", filepath.Join(tb.TempDir(), name),
			"--data-root", os.TempDir()}
		if _, err := os.Stat(fashionDir); err == nil {
			args = append(args, "--data-root", fashionDir)
		}
		if i > 0 {
			args = append(args, "--join", c.nodes[0].Gossip)
		}
		url := ""
		if web {
			addr := freeLoopbackPort(tb)
			args = append(args, "--http", addr)
			url = "http://" + addr
		}
		node, err := proccluster.Start(proccluster.Options{Exe: exe, Env: nodeEnv()}, args...)
		if err != nil {
			tb.Fatalf("serve %s: %v", name, err)
		}
		tb.Cleanup(node.Kill)
		c.nodes, c.urls = append(c.nodes, node), append(c.urls, url)
	}
	// Joined: the first lists every other.
	for _, node := range c.nodes[1:] {
		if _, err := c.nodes[0].WaitFor(30*time.Second, "member joined", "member", node.Name); err != nil {
			tb.Fatal(err)
		}
	}
	if web {
		for _, u := range c.urls {
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, body := c.get(u + "/readyz")
				if code == 200 {
					break
				}
				if time.Now().After(deadline) {
					tb.Fatalf("%s/readyz: %d %s", u, code, body)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return c
}

// get GETs url with the operator token and returns the status and body (0 on a transport error).
func (c *httpCluster) get(url string) (int, []byte) {
	return getWith(c.token, url)
}

func getWith(token, url string) (int, []byte) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// scrape GETs every node's /metrics every second until ctx ends, as Prometheus would; it
// returns the number of good scrapes.
func (c *httpCluster) scrape(ctx context.Context) int {
	good := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, u := range c.urls {
			if code, body := c.get(u + "/metrics"); code == 200 && strings.Contains(string(body), "didnmf_iterations_total") {
				good++
			}
		}
		select {
		case <-ctx.Done():
			return good
		case <-tick.C:
		}
	}
}

// startBrowser starts a headless chromium (its profile in the directory profile) logged in to url with the operator token, or
// skips the benchmark when there is none.
func startBrowser(tb testing.TB, url, token, profile string) context.Context {
	tb.Helper()
	bin := browsertest.Path()
	if bin == "" {
		tb.Skip("no chromium: apt-get install -y chromium (Debian), or set DIDNMF_CHROMIUM")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.UserDataDir(profile),
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	// The browser starts on the first use of ctx, which has no deadline (a derived one's end
	// would close it).
	if err := chromedp.Listen(ctx, func(any) {}); err != nil {
		tb.Fatalf("start chromium %s: %v", bin, err)
	}
	runCtx, cancelRun := context.WithTimeout(ctx, 30*time.Second)
	defer cancelRun()
	if err := chromedp.Do(runCtx, chromedp.Navigate(url+"/login?token="+token)); err != nil {
		tb.Fatalf("log in: %v", err)
	}
	return ctx
}

// browserWait polls the JavaScript expression in the browser until it is true.
func browserWait(tb testing.TB, ctx context.Context, what, expr string) {
	tb.Helper()
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	poll := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(55*time.Second))
	if _, err := chromedp.Run(runCtx, poll); err != nil {
		tb.Fatalf("the page: %s: %v", what, err)
	}
}

// overheadJob is the job BenchmarkHTTPOverhead times: Fashion-MNIST (rank 10 on 4 shards)
// when Debian's dataset-fashion-mnist is installed, else a synthetic matrix of the same
// order of iteration time.
func overheadJob(iters int) []string {
	job := []string{"--rank", "10", "--shards", "4", "--max-iter", strconv.Itoa(iters), "--tol", "0", "--stall-tol", "0", "--quiet"}
	if _, err := os.Stat(fashionDir + "/train-images-idx3-ubyte.gz"); err == nil {
		return append(job, "--input", fashionDir+"/train-images-idx3-ubyte.gz", "--input", fashionDir+"/t10k-images-idx3-ubyte.gz", "--ingest", "shared")
	}
	return append(job, "--input", "synthetic:m=100,n=200000,k=10,seed=1")
}

// iterSeconds reads a report.json's seconds per iteration (iterate_seconds / iterations).
func iterSeconds(tb testing.TB, path string) float64 {
	tb.Helper()
	var r struct {
		Iterations     int     `json:"iterations"`
		IterateSeconds float64 `json:"iterate_seconds"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil || r.Iterations == 0 {
		tb.Fatalf("%s: %v (%d iterations)", path, err, r.Iterations)
	}
	return r.IterateSeconds / float64(r.Iterations)
}

// overheadArm is one way of running the job in BenchmarkHTTPOverhead.
type overheadArm int

const (
	armPlain   overheadArm = iota // serve without --http
	armScraped                    // serve --http, every node's /metrics scraped every second
	armBrowser                    // and a browser on the job's page (#job=ID) from its start
)

func (a overheadArm) String() string {
	return [...]string{"without --http", "--http, scraped", "--http, scraped, browser"}[a]
}

// overheadTiming is one run's seconds per iteration, and the CPU seconds the 3 nodes and the
// browser (all its processes) spent from the job's submission to its end.
type overheadTiming struct {
	spi, nodeCPU, browserCPU float64
}

// overheadRun runs the job once on a fresh 3-process cluster, as arm says.
func overheadRun(tb testing.TB, arm overheadArm, iters int) overheadTiming {
	web := arm != armPlain
	c := startHTTPCluster(tb, 3, web)
	out := filepath.Join(tb.TempDir(), "out")
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"factorize", "--cluster", c.nodes[0].Gossip, "--out", out}, overheadJob(iters)...)...)
	cmd.Env = nodeEnv()
	var text strings.Builder
	cmd.Stdout, cmd.Stderr = &text, &text
	var (
		scrapes int
		wg      sync.WaitGroup
	)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var browser context.Context
	profile := ""
	if arm == armBrowser {
		profile = tb.TempDir()
		browser = startBrowser(tb, c.urls[0], c.token, profile)
	}
	if web {
		wg.Add(1)
		go func() { defer wg.Done(); scrapes = c.scrape(ctx) }()
	}
	nodesCPU := func() float64 {
		sum := 0.0
		for _, n := range c.nodes {
			sum += procCPUSeconds(tb, n.Cmd.Process.Pid)
		}
		return sum
	}
	node0, browser0 := nodesCPU(), browserCPU(profile)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	id := ""
	if arm == armBrowser {
		// The browser follows the job from its start: find its id, open #job=ID.
		deadline := time.Now().Add(60 * time.Second)
		for id == "" {
			_, body := c.get(c.urls[0] + "/api/v1/jobs")
			var list struct {
				Jobs []httpapi.JobView `json:"jobs"`
			}
			if json.Unmarshal(body, &list) == nil && len(list.Jobs) > 0 {
				id = list.Jobs[0].ID
			} else if time.Now().After(deadline) {
				tb.Fatalf("no job listed: %s", body)
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		runCtx, cancel := context.WithTimeout(browser, 30*time.Second)
		err := chromedp.Do(runCtx, chromedp.Navigate(c.urls[0]+"/#job="+id))
		cancel()
		if err != nil {
			tb.Fatalf("open the job's page: %v", err)
		}
	}
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("factorize: %v\n%s", err, text.String())
	}
	t := overheadTiming{nodeCPU: nodesCPU() - node0, browserCPU: browserCPU(profile) - browser0}
	if arm == armBrowser {
		// The page followed the job to its end: its stream delivered the ended state.
		browserWait(tb, browser, "the job's page shows it done", fmt.Sprintf(`document.getElementById("detail-id").textContent === %q && `+
			`document.getElementById("detail-iteration").getAttribute("data-iteration") === "%d" && document.getElementById("detail-state").innerText.includes("done")`, id, iters))
	}
	stop()
	wg.Wait()
	if web && scrapes == 0 {
		tb.Fatal("no /metrics scrape succeeded")
	}
	for _, n := range c.nodes {
		n.Kill()
	}
	t.spi = iterSeconds(tb, filepath.Join(out, "report.json"))
	return t
}

// browserCPU is the CPU seconds of the browser: the processes whose command line names its
// profile directory and their descendants (0 for "").
func browserCPU(profile string) float64 {
	if profile == "" {
		return 0
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	parent, cpu := map[int]int{}, map[int]float64{}
	in := map[int]bool{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		stat, err2 := os.ReadFile(d + "/stat")
		if err != nil || err2 != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		parent[pid], _ = strconv.Atoi(f[1])
		cpu[pid] = statCPUSeconds(stat)
		if cmdline, err := os.ReadFile(d + "/cmdline"); err == nil && strings.Contains(string(cmdline), profile) {
			in[pid] = true
		}
	}
	sum := 0.0
	for pid, sec := range cpu {
		for p, hops := pid, 0; p > 1 && hops < 64; p, hops = parent[p], hops+1 {
			if in[p] {
				sum += sec
				break
			}
		}
	}
	return sum
}

func benchPairs() int {
	if n, err := strconv.Atoi(os.Getenv("DIDNMF_BENCH_PAIRS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// BenchmarkHTTPOverhead times the same job on 3 serve processes without --http, with it and
// every node's /metrics scraped every second, and with a browser on the job's page as well,
// in rounds of the three (DIDNMF_BENCH_PAIRS rounds), and reports the medians: seconds per
// iteration, the ratios to the run without --http of the same round, and the CPU seconds of
// the nodes and of the browser during the job.
func BenchmarkHTTPOverhead(b *testing.B) {
	iters := 100
	arms := []overheadArm{armPlain, armScraped, armBrowser}
	spi := make([][]float64, len(arms))
	ratio := make([][]float64, len(arms))
	cpu := make([][]float64, len(arms))
	var browserSec []float64
	for i := 0; i < benchPairs(); i++ {
		for a, arm := range arms {
			t := overheadRun(b, arm, iters)
			spi[a], cpu[a] = append(spi[a], t.spi), append(cpu[a], t.nodeCPU)
			ratio[a] = append(ratio[a], t.spi/spi[0][i])
			if arm == armBrowser {
				browserSec = append(browserSec, t.browserCPU)
			}
			b.Logf("round %d, %s: %.2f ms/iter (%.3f of without), nodes' CPU %.1f s, browser's CPU %.1f s", i+1, arm, t.spi*1e3, t.spi/spi[0][i], t.nodeCPU, t.browserCPU)
		}
	}
	units := []string{"plain", "scraped", "browser"}
	for a := range arms {
		b.ReportMetric(bench.Median(spi[a])*1e3, "ms/iter-"+units[a])
		b.ReportMetric(bench.Median(cpu[a]), "node-cpu-s-"+units[a])
		if a > 0 {
			b.ReportMetric(bench.Median(ratio[a]), units[a]+"/plain")
		}
	}
	b.ReportMetric(bench.Median(browserSec), "browser-cpu-s")
}

// sseEvents follows one SSE stream and returns the names of the events it received, in
// order, once the server closes it or ctx ends.
func sseEvents(ctx context.Context, token, url string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, ev)
		}
	}
	if ctx.Err() != nil {
		return events, ctx.Err()
	}
	return events, nil
}

// streamsRun submits one job for each of clients (each with its own client token) to the
// first node's API and, when streams is set, opens perClient progress streams on each job
// and one operator stream of the cluster, and follows them to the end. It returns the jobs'
// seconds per iteration, the first node's CPU seconds and peak RSS (bytes) while the jobs
// ran, and each stream's events.
func streamsRun(tb testing.TB, c *httpCluster, clients []string, perClient int, spec string) (spi []float64, cpu float64, rss int64, streams [][]string) {
	tb.Helper()
	base := c.urls[0]
	pid := c.nodes[0].Cmd.Process.Pid
	cpu0 := procCPUSeconds(tb, pid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	ids := make([]string, len(clients))
	for i, name := range clients {
		token := httpapi.ClientToken(c.secret, name)
		req, _ := http.NewRequest("POST", base+"/api/v1/jobs", strings.NewReader(spec))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		var got struct{ ID string }
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 202 || json.Unmarshal(body, &got) != nil {
			tb.Fatalf("submit as %s: %d %s", name, resp.StatusCode, body)
		}
		ids[i] = got.ID
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev, err := sseEvents(ctx, token, base+"/api/v1/jobs/"+got.ID+"/events")
				mu.Lock()
				defer mu.Unlock()
				streams = append(streams, ev)
				if err != nil {
					errs = append(errs, err)
				}
			}()
		}
	}
	dashCtx, stopDash := context.WithCancel(ctx)
	if perClient > 0 {
		// The dashboard's stream of the cluster, as the operator.
		go sseEvents(dashCtx, c.token, base+"/api/v1/events")
	}
	// Sample the node's RSS while the jobs run, until every job has ended.
	done := make(map[string]bool)
	for len(done) < len(ids) {
		if r := procRSS(pid); r > rss {
			rss = r
		}
		for i, id := range ids {
			if done[id] {
				continue
			}
			code, body := getWith(httpapi.ClientToken(c.secret, clients[i]), base+"/api/v1/jobs/"+id)
			var j httpapi.JobView
			if code == 200 && json.Unmarshal(body, &j) == nil && j.State != "running" && j.State != "placing" && j.State != "recovering" && j.EndedUnixMs > 0 && len(j.Outputs) > 0 {
				if j.Error != nil {
					tb.Fatalf("job %s: %+v", id, j.Error)
				}
				done[id] = true
			}
		}
		if ctx.Err() != nil {
			tb.Fatal("the jobs did not end in 10 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	cpu = procCPUSeconds(tb, pid) - cpu0
	wg.Wait()
	stopDash()
	for _, err := range errs {
		tb.Error(err)
	}
	for i, id := range ids {
		code, body := getWith(httpapi.ClientToken(c.secret, clients[i]), base+"/api/v1/jobs/"+id+"/outputs/report.json")
		if code != 200 {
			tb.Fatalf("report of %s: %d %s", id, code, body)
		}
		path := filepath.Join(tb.TempDir(), "report.json")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			tb.Fatal(err)
		}
		spi = append(spi, iterSeconds(tb, path))
	}
	return spi, cpu, rss, streams
}

// procCPUSeconds is the process's user + system CPU time.
func procCPUSeconds(tb testing.TB, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	return statCPUSeconds(b)
}

// statCPUSeconds reads utime + stime of a /proc/PID/stat: the fields after the command's
// closing parenthesis start with the state (field 3); utime is field 14, stime 15.
func statCPUSeconds(b []byte) float64 {
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// procRSS is the process's resident set in bytes (0 when unknown).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// streamsSpec is a JSON job spec with the keys given and a fixed number of iterations, its
// shards placed on the cluster's other nodes than the first (which serves the streams, so
// that its CPU is theirs and the coordinator's).
func streamsSpec(c *httpCluster, keys string) string {
	var nodes []string
	for _, n := range c.nodes[1:] {
		nodes = append(nodes, strconv.Quote(n.Actor))
	}
	return `{` + keys + `, "tol": 0, "stall_tol": 0, "nodes": [` + strings.Join(nodes, ", ") + `]}`
}

// hundredStreamClients are 4 client names with 25 streams each: 100 streams, within the
// per-identity limit of 32 (httpapi.DefaultMaxStreamsPerIdentity).
var hundredStreamClients = []string{"alice", "bob", "carol", "dave"}

const hundredStreamsPerClient = 25

// TestHundredProgressStreams follows 4 clients' jobs, submitted to one node and running on the
// two others, with 25 progress streams each (100) and the operator's cluster stream: every
// stream gets the job first and its end last, and the jobs finish.
func TestHundredProgressStreams(t *testing.T) {
	c := startHTTPCluster(t, 3, true)
	spec := streamsSpec(c, `"input": "synthetic:m=20,n=50000,k=5,seed=3", "rank": 5, "shards": 2, "max_iter": 200`)
	_, _, _, streams := streamsRun(t, c, hundredStreamClients, hundredStreamsPerClient, spec)
	progress := 0
	if len(streams) != len(hundredStreamClients)*hundredStreamsPerClient {
		t.Fatalf("%d streams ended, want %d", len(streams), len(hundredStreamClients)*hundredStreamsPerClient)
	}
	for i, ev := range streams {
		if len(ev) < 2 || ev[0] != "job" || ev[len(ev)-1] != "end" {
			t.Errorf("stream %d: events %v, want job first and end last", i, ev)
		}
		if slices.Contains(ev, "progress") {
			progress++
		}
	}
	t.Logf("%d of %d streams got progress events before the end", progress, len(streams))
	if code, body := c.get(c.urls[0] + "/readyz"); code != 200 {
		t.Errorf("after the streams: /readyz %d %s", code, body)
	}
}

// BenchmarkHundredStreams times the 4 clients' jobs without streams and with 100 progress
// streams and the dashboard's stream on the node they were submitted to, alternately, and
// reports the medians of the seconds per iteration and the node's CPU and peak RSS.
func BenchmarkHundredStreams(b *testing.B) {
	var without, with, ratios, cpuWithout, cpuWith, rssWithout, rssWith []float64
	for i := 0; i < benchPairs(); i++ {
		for _, per := range []int{0, hundredStreamsPerClient} {
			c := startHTTPCluster(b, 3, true)
			spec := streamsSpec(c, `"input": "synthetic:m=100,n=100000,k=10,seed=1", "rank": 10, "shards": 2, "max_iter": 100`)
			spi, cpu, rss, streams := streamsRun(b, c, hundredStreamClients, per, spec)
			for _, n := range c.nodes {
				n.Kill()
			}
			for _, ev := range streams {
				if len(ev) == 0 || ev[len(ev)-1] != "end" {
					b.Fatalf("a stream ended without end: %v", ev)
				}
			}
			m := bench.Median(spi)
			b.Logf("pair %d, %d streams: %.2f ms/iter (jobs %v), node CPU %.1f s, peak RSS %d MiB", i+1, per*len(hundredStreamClients), m*1e3, spi, cpu, rss>>20)
			if per == 0 {
				without, cpuWithout, rssWithout = append(without, m), append(cpuWithout, cpu), append(rssWithout, float64(rss))
			} else {
				with, cpuWith, rssWith = append(with, m), append(cpuWith, cpu), append(rssWith, float64(rss))
				ratios = append(ratios, m/without[len(without)-1])
			}
		}
	}
	b.ReportMetric(bench.Median(without)*1e3, "ms/iter-none")
	b.ReportMetric(bench.Median(with)*1e3, "ms/iter-100")
	b.ReportMetric(bench.Median(ratios), "100/none")
	b.ReportMetric(bench.Median(cpuWithout), "cpu-s-none")
	b.ReportMetric(bench.Median(cpuWith), "cpu-s-100")
	b.ReportMetric(bench.Median(rssWithout)/(1<<20), "MiB-rss-none")
	b.ReportMetric(bench.Median(rssWith)/(1<<20), "MiB-rss-100")
}
