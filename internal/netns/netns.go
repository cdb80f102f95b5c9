// Package netns builds a small network of Linux network namespaces for tests that cut real
// links: every host is a namespace of its own with one address, all hosts hang off a router
// (a namespace more), and a cut is a policy-routing rule in the router that drops the
// packets between two hosts. It needs root and iproute2 (the ip command), nothing else.
//
//	n, err := netns.New("a", "b", "c")    // or netns.ForTest(t, "a", "b", "c"): skips without root
//	...
//	cmd := n.Host("a").Command(exe, args...) // runs exe in a's namespace
//	err = n.Cut([]*netns.Host{n.Host("a")}, []*netns.Host{n.Host("b"), n.Host("c")})
//	err = n.Heal()
//	err = n.Close()
//
// The layout, for hosts 1..N:
//
//	host i: namespace PREFIX<pid>-<seq>-h-<name>, eth0 = 10.213.i.2/24, default via 10.213.i.1
//	router: namespace PREFIX<pid>-<seq>-hub, h<i> = 10.213.i.1/24 (a veth pair with host i's eth0),
//	        IPv4 forwarding on
//
// The host's own network (the root namespace) is never touched: the veth pairs are created
// in the namespaces, and the addresses are private to them, so they cannot collide with the
// machine's. Nothing outside the namespaces can reach in: a client must run in a host too.
//
// Why a router and blackhole rules. A cut must behave as a real network failure: the packets
// vanish on the way, and the sender learns nothing (TCP retransmits until it gives up, UDP
// just goes unanswered). A blackhole route or rule on the sender's side does not: a local
// send into it fails at once (EINVAL), which no real cut does. In the router, a rule
// "from A to B blackhole" drops the forwarded packets silently (no ICMP, unlike prohibit or
// unreachable), one direction at a time, so that groups, one-way and overlapping cuts are
// all rules; and it needs only iproute2, not iptables or nftables. Taking a link down would
// cut a host from everyone, not from a group.
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Prefix starts the name of every namespace this package makes; the creating process's pid
// follows it, so that RemoveStale can tell the namespaces of a process that died.
const Prefix = "didnmf-t"

// cutPref is the priority of the cut rules in the router: before the main table (32766).
const cutPref = "100"

// ErrUnavailable is what New's error wraps when this machine or process cannot make network
// namespaces (not Linux, not root, no ip command, or the kernel refused); the error says which.
var ErrUnavailable = errors.New("network namespaces unavailable")

// Host is a namespace of the network, with its address.
type Host struct {
	// Name is the host's name as given to New; NS is its namespace's name (for ip netns).
	Name, NS string
	// IP is the host's address, the one its processes bind to and are reached at.
	IP netip.Addr
}

// Exec returns the command line under which a command runs in the host's namespace:
// ip netns exec NS, to which the command and its arguments are appended. ip execs the
// command in place: the process (its pid, its signals, its exit status) is the command's.
func (h *Host) Exec() []string { return []string{ipPath(), "netns", "exec", h.NS} }

// Command is exec.Command for exe with args, run in the host's namespace.
func (h *Host) Command(exe string, args ...string) *exec.Cmd {
	return exec.Command(ipPath(), append([]string{"netns", "exec", h.NS, exe}, args...)...)
}

// Net is a router and the hosts hanging off it.
type Net struct {
	hub   string
	hosts []*Host

	mu     sync.Mutex
	cuts   map[[2]netip.Addr]bool // from, to: a blackhole rule in the router
	closed bool
}

var seq atomic.Int64

var hostName = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// New makes a router and one host per name (1 to 250 distinct names of lower-case letters and
// digits), after removing the namespaces left by processes that died (RemoveStale). When the
// machine cannot make them the error wraps ErrUnavailable; anything made is removed again on
// any error. Close removes the network.
func New(names ...string) (*Net, error) {
	if len(names) == 0 || len(names) > 250 {
		return nil, fmt.Errorf("netns: %d hosts, want 1 to 250", len(names))
	}
	for i, name := range names {
		if !hostName.MatchString(name) || slices.Contains(names[:i], name) {
			return nil, fmt.Errorf("netns: host name %q: want distinct names of 1-16 lower-case letters and digits", name)
		}
	}
	if err := usable(); err != nil {
		return nil, err
	}
	_ = RemoveStale()
	id := fmt.Sprintf("%s%d-%d", Prefix, os.Getpid(), seq.Add(1))
	n := &Net{hub: id + "-hub", cuts: map[[2]netip.Addr]bool{}}
	if err := ip("netns", "add", n.hub); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err := n.build(id, names); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

// build makes the hosts and links them to the router.
func (n *Net) build(id string, names []string) error {
	steps := [][]string{{"-n", n.hub, "link", "set", "lo", "up"}}
	for i, name := range names {
		h := &Host{Name: name, NS: id + "-h-" + name, IP: netip.AddrFrom4([4]byte{10, 213, byte(i + 1), 2})}
		if err := ip("netns", "add", h.NS); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		n.hosts = append(n.hosts, h)
		port := "h" + strconv.Itoa(i+1)
		gw := netip.AddrFrom4([4]byte{10, 213, byte(i + 1), 1}).String()
		// The pair is made in the namespaces, never in the root one: no name there to collide with.
		if err := ip("link", "add", "name", port, "netns", n.hub, "type", "veth", "peer", "name", "eth0", "netns", h.NS); err != nil {
			return fmt.Errorf("%w: veth pair: %v", ErrUnavailable, err)
		}
		steps = append(steps,
			[]string{"-n", n.hub, "addr", "add", gw + "/24", "dev", port},
			[]string{"-n", n.hub, "link", "set", port, "up"},
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
			[]string{"-n", h.NS, "addr", "add", h.IP.String() + "/24", "dev", "eth0"},
			[]string{"-n", h.NS, "link", "set", "eth0", "up"},
			[]string{"-n", h.NS, "route", "add", "default", "via", gw})
	}
	// Addresses, links up and routes cannot fail where the namespaces and pairs could be
	// made: an error here is a bug, not an unwilling machine.
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	// Forwarding is a sysctl of the router's namespace: /proc/sys/net is the namespace of
	// the process that opens it.
	if out, err := exec.Command(ipPath(), "netns", "exec", n.hub, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward").CombinedOutput(); err != nil {
		return fmt.Errorf("%w: forwarding in the router: %v: %s", ErrUnavailable, err, bytes.TrimSpace(out))
	}
	// Cuts are policy-routing rules: make sure the kernel has them.
	probe := []string{"-n", n.hub, "rule", "add", "pref", cutPref, "from", "10.213.255.1", "to", "10.213.255.2", "blackhole"}
	if err := ip(probe...); err != nil {
		return fmt.Errorf("%w: policy routing (ip rule): %v", ErrUnavailable, err)
	}
	probe[3] = "del"
	return ip(probe...)
}

// Hosts returns the hosts in the order of New's names.
func (n *Net) Hosts() []*Host { return slices.Clone(n.hosts) }

// Host returns the host named name, or nil.
func (n *Net) Host(name string) *Host {
	for _, h := range n.hosts {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Cut drops every packet between a host of a and a host of b, both ways; other traffic (within
// a group, or with hosts in neither) is not affected. Cuts add up until Heal.
func (n *Net) Cut(a, b []*Host) error {
	if err := n.CutOneWay(a, b); err != nil {
		return err
	}
	return n.CutOneWay(b, a)
}

// CutOneWay drops every packet from a host of from to a host of to, and only those: the
// other direction still passes (an asymmetric partition).
func (n *Net) CutOneWay(from, to []*Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range from {
		for _, y := range to {
			key := [2]netip.Addr{x.IP, y.IP}
			if x == y || n.cuts[key] {
				continue
			}
			if err := ip("-n", n.hub, "rule", "add", "pref", cutPref, "from", x.IP.String(), "to", y.IP.String(), "blackhole"); err != nil {
				return err
			}
			n.cuts[key] = true
		}
	}
	return nil
}

// Heal removes every cut.
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for key := range n.cuts {
		if err := ip("-n", n.hub, "rule", "del", "pref", cutPref, "from", key[0].String(), "to", key[1].String(), "blackhole"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(n.cuts, key)
	}
	return errors.Join(errs...)
}

// Close kills the processes still running in the hosts (SIGKILL) and removes the namespaces,
// which takes their links and rules with them. Closing again does nothing.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, h := range n.hosts {
		errs = append(errs, remove(h.NS))
	}
	n.hosts = nil
	return errors.Join(append(errs, remove(n.hub))...)
}

// Check tells whether this process can make network namespaces with the ip command, and if
// not, why (an error wrapping ErrUnavailable): it makes one and removes it again, so that a
// kernel or container that refuses (no CAP_SYS_ADMIN, say) is found before a test spends
// time on what it would need them for.
func Check() error {
	if err := usable(); err != nil {
		return err
	}
	probe := fmt.Sprintf("%s%d-%d-probe", Prefix, os.Getpid(), seq.Add(1))
	if err := ip("netns", "add", probe); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return ip("netns", "del", probe)
}

// usable tells whether this is Linux, run by root, with the ip command.
func usable() error {
	switch {
	case runtime.GOOS != "linux":
		return fmt.Errorf("%w: network namespaces are Linux's, this is %s", ErrUnavailable, runtime.GOOS)
	case os.Geteuid() != 0:
		return fmt.Errorf("%w: making them needs root (euid %d)", ErrUnavailable, os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: no ip command (install iproute2): %v", ErrUnavailable, err)
	}
	return nil
}

// RemoveStale removes the namespaces made by this package in processes that are gone (a
// test binary killed before its cleanup ran), with the processes still running in them.
func RemoveStale() error {
	out, err := exec.Command(ipPath(), "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %v", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ") // "NAME (id: N)"
		rest, ok := strings.CutPrefix(name, Prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || alive(pid) {
			continue
		}
		errs = append(errs, remove(name))
	}
	return errors.Join(errs...)
}

// alive tells whether a process with the pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// remove kills the processes in a namespace and deletes it.
func remove(ns string) error {
	if out, err := exec.Command(ipPath(), "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return ip("netns", "del", ns)
}

// ipPath is the ip command's path (as found in PATH, or "ip").
func ipPath() string {
	if p, err := exec.LookPath("ip"); err == nil {
		return p
	}
	return "ip"
}

// ip runs the ip command with args; the error has its output.
func ip(args ...string) error {
	out, err := exec.Command(ipPath(), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
