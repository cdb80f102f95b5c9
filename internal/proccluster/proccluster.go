// Package proccluster starts `node serve` processes and follows what they log, as structured
// records: the one launcher of `node bench --procs`, the cluster tests and the chaos suite
// (nodes on loopback), and of the partition tests whose nodes run in network namespaces of
// their own (Options.Wrap).
//
// A node is started with --log-format json; every line of its stderr is a JSON object (slog's
// JSON handler: "time", "level", "msg" and the record's attributes), kept in order with the
// time it was read. Waiting for an event is waiting for a record:
//
//	n, err := proccluster.Start(proccluster.Options{Exe: exe}, "serve", "--bind", "127.0.0.1:0", "--name", "a")
//	...
//	at, err := n.WaitFor(10*time.Second, "member joined", "member", "b")
//
// Lines that are not JSON (a panic's stack, say) are kept too, with only their text.
package proccluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// Options say how to run the node binary.
type Options struct {
	// Exe is the binary (the node command, or a test binary that acts as it).
	Exe string
	// Env is the process's environment (nil: this process's).
	Env []string
	// StartTimeout bounds the wait for the node's "serving" record (0: 30 s).
	StartTimeout time.Duration
	// Wrap, when set, is a command line the node is run under: the process started is
	// Wrap[0], with Wrap[1:], Exe and the node's arguments after it (ip netns exec NAME, say,
	// to run the node in a network namespace; see internal/netns). The wrapper must exec the
	// node in place, so that Kill and Cmd.Process reach the node itself.
	Wrap []string
	// Stdout receives the node's standard output (nil: discarded), e.g. to read the login URL
	// of serve --http, which goes there only.
	Stdout io.Writer
}

// Record is one line of a node's log.
type Record struct {
	// At is when the line was read.
	At time.Time
	// Msg is the record's message; Attrs its other fields (time and level included), as JSON
	// decoded them (strings, float64s, bools...). Both are empty for a line that is not JSON.
	Msg   string
	Attrs map[string]any
	// Line is the line as the node wrote it.
	Line string
}

// Attr returns the record's attribute key as a string ("" when absent; numbers and booleans in
// their JSON form).
func (r Record) Attr(key string) string {
	switch v := r.Attrs[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// matches reports whether r has message msg and the attributes of kv (key, value, key, value...).
func (r Record) matches(msg string, kv []string) bool {
	if r.Msg != msg {
		return false
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if r.Attr(kv[i]) != kv[i+1] {
			return false
		}
	}
	return true
}

// Node is a running `node serve` process.
type Node struct {
	// Name, Gossip and Actor are the node's name and addresses, from its "serving" record;
	// Started is when the process was started.
	Name, Gossip, Actor string
	Started             time.Time
	// Cmd is the process.
	Cmd *exec.Cmd

	mu      sync.Mutex
	changed *sync.Cond
	records []Record
	exited  chan struct{}
	waitErr error
}

// Start runs opts.Exe with args (which must start a `serve` command; --log-format json is
// added) and returns once the node logged that it serves. The caller stops it (Kill, or
// Cmd.Process.Signal then Wait).
func Start(opts Options, args ...string) (*Node, error) {
	line := append(append(slices.Clone(opts.Wrap), opts.Exe), args...)
	cmd := exec.Command(line[0], append(line[1:], "--log-format", "json")...)
	cmd.Env = opts.Env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	if opts.Stdout != nil {
		cmd.Stdout = opts.Stdout
	}
	n := &Node{Cmd: cmd, exited: make(chan struct{})}
	n.changed = sync.NewCond(&n.mu)
	n.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go n.read(stderr)
	limit := opts.StartTimeout
	if limit <= 0 {
		limit = 30 * time.Second
	}
	r, err := n.WaitFor(limit, "serving")
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("node serve did not start: %w\n%s", err, n.Log())
	}
	n.Name, n.Gossip, n.Actor = r.Attr("name"), r.Attr("gossip"), r.Attr("actor")
	return n, nil
}

// read keeps the node's log lines until its stderr closes, then waits for the process.
func (n *Node) read(stderr io.Reader) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		r := Record{At: time.Now(), Line: line}
		if attrs := map[string]any{}; json.Unmarshal([]byte(line), &attrs) == nil {
			r.Msg, _ = attrs["msg"].(string)
			delete(attrs, "msg")
			r.Attrs = attrs
		}
		n.mu.Lock()
		n.records = append(n.records, r)
		n.changed.Broadcast()
		n.mu.Unlock()
	}
	err := n.Cmd.Wait()
	n.mu.Lock()
	n.waitErr = err
	close(n.exited)
	n.changed.Broadcast()
	n.mu.Unlock()
}

// Records returns a copy of the records logged so far.
func (n *Node) Records() []Record {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.records)
}

// Log returns the log so far, as the node wrote it.
func (n *Node) Log() string {
	var b bytes.Buffer
	for _, r := range n.Records() {
		b.WriteString(r.Line)
		b.WriteByte('\n')
	}
	return b.String()
}

// Find returns the records with message msg and the attributes kv (key, value, ...).
func (n *Node) Find(msg string, kv ...string) []Record {
	var out []Record
	for _, r := range n.Records() {
		if r.matches(msg, kv) {
			out = append(out, r)
		}
	}
	return out
}

// ErrExited is returned by WaitFor when the node exited without logging the record.
var ErrExited = errors.New("the node exited")

// WaitFor waits up to limit for a record with message msg and the attributes kv (key, value,
// ...), and returns the first one.
func (n *Node) WaitFor(limit time.Duration, msg string, kv ...string) (Record, error) {
	timer := time.AfterFunc(limit, func() {
		n.mu.Lock()
		n.changed.Broadcast()
		n.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(limit)
	n.mu.Lock()
	defer n.mu.Unlock()
	for {
		for _, r := range n.records {
			if r.matches(msg, kv) {
				return r, nil
			}
		}
		select {
		case <-n.exited:
			return Record{}, fmt.Errorf("%w (%v) before logging %q %v", ErrExited, n.waitErr, msg, kv)
		default:
		}
		if time.Now().After(deadline) {
			return Record{}, fmt.Errorf("no %q %v logged within %v", msg, kv, limit)
		}
		n.changed.Wait()
	}
}

// Exited is closed when the process has exited; Err then says how.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// Err is the process's exit error, once Exited is closed.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waitErr
}

// Kill kills the process (SIGKILL) and waits until it has exited.
func (n *Node) Kill() {
	_ = n.Cmd.Process.Kill()
	<-n.exited
}
