package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/pki"
	"github.com/didnmf/didnmf/server"
)

// child is a `node serve` process started by bench --procs.
type child struct {
	name, gossip string
	cmd          *exec.Cmd
	started      time.Time
	mu           sync.Mutex
	seen         map[string]time.Time // log event ("joined a", "failed a") -> when it was read
	cond         *sync.Cond
}

var (
	// serveLine is the line `node serve` prints once it serves: name, gossip and actor address.
	serveLine = regexp.MustCompile(`^node (\S+) serving: gossip (\S+), actor (\S+),`)
	eventLine = regexp.MustCompile(`msg="member (joined|left|failed)[^"]*" member=(\S+)`)
)

// startChild starts `node serve` from this executable and waits until it serves.
func startChild(name, join, secretFile string, threads int) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "didnmf-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--bind", "127.0.0.1:0", "--name", name, "--data-dir", dir, "--threads", fmt.Sprint(threads), "--secret-file", secretFile}
	if join != "" {
		args = append(args, "--join", join)
	}
	c := &child{name: name, cmd: exec.Command(exe, args...), seen: map[string]time.Time{}}
	c.cond = sync.NewCond(&c.mu)
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := eventLine.FindStringSubmatch(sc.Text()); m != nil {
				c.mu.Lock()
				c.seen[m[1]+" "+m[2]] = time.Now()
				c.cond.Broadcast()
				c.mu.Unlock()
			}
		}
		os.RemoveAll(dir)
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := serveLine.FindStringSubmatch(line)
	if err != nil || m == nil {
		c.cmd.Process.Kill()
		return nil, fmt.Errorf("node serve %s did not start: %q %v", name, line, err)
	}
	c.gossip = m[2]
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(nopWriter{}) }()
	return c, nil
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// waitSeen waits until the child logged the event, and returns when it did.
func (c *child) waitSeen(event string, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	go func() { // wake the waiter at the deadline
		time.Sleep(limit)
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if t, ok := c.seen[event]; ok {
			return t, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s did not log %q within %v", c.name, event, limit)
		}
		c.cond.Wait()
	}
}

// procsBench is what bench --procs measures.
type procsBench struct {
	actorBench
	joinSec, detectSec float64
}

// benchProcs starts n `node serve` processes on loopback, measures how long each joining node
// takes to be seen by all, times the job on them against the driver (alternately, pairs
// times), and with detect kills one with SIGKILL and measures how long the others take to
// declare it dead.
func benchProcs(jf *jobFlags, j *job, blocks []kernels.Block, n, threads, pairs int, detect bool) (*procsBench, error) {
	var kids []*child
	defer func() {
		for _, k := range kids {
			_ = k.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, k := range kids {
			_ = k.cmd.Wait()
		}
	}()
	// The bench's cluster has a secret of its own.
	secretDir, err := os.MkdirTemp("", "didnmf-bench-secret-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(secretDir)
	secret, secretFile := pki.NewSecret(), filepath.Join(secretDir, "cluster.secret")
	if err := pki.WriteSecret(secretFile, secret); err != nil {
		return nil, err
	}
	var joins []float64
	for i := 0; i < n; i++ {
		join := ""
		if i > 0 {
			join = kids[0].gossip
		}
		k, err := startChild(fmt.Sprintf("bench-%d", i+1), join, secretFile, threads)
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
		// Joined: every node, the newcomer included, lists it.
		var last time.Time
		for _, o := range kids {
			t, err := o.waitSeen("joined "+k.name, 30*time.Second)
			if err != nil {
				return nil, err
			}
			if t.After(last) {
				last = t
			}
		}
		if i > 0 {
			joins = append(joins, last.Sub(k.started).Seconds())
		}
	}
	c, err := server.Connect(server.ClientConfig{Cluster: []string{kids[0].gossip}, Secret: secret})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	spec := jf.wireSpec(j, nil)
	ab, err := timePairs(jf, j, blocks, pairs, func() (*actors.Result, error) {
		job, err := c.Submit(context.Background(), spec)
		if err != nil {
			return nil, err
		}
		return follow(context.Background(), job, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	out := &procsBench{actorBench: *ab}
	out.joinSec = median(joins)
	if detect && n > 1 {
		victim := kids[n-1]
		killed := time.Now()
		if err := victim.cmd.Process.Kill(); err != nil {
			return nil, err
		}
		var last time.Time
		for _, o := range kids[:n-1] {
			t, err := o.waitSeen("failed "+victim.name, 60*time.Second)
			if err != nil {
				return nil, err
			}
			if t.After(last) {
				last = t
			}
		}
		out.detectSec = last.Sub(killed).Seconds()
		kids = slices.Delete(kids, n-1, n)
		_ = victim.cmd.Wait()
	}
	return out, nil
}
