package didnmf

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/didnmf/didnmf/internal/cpuusage"
)

// Usage is a reading of the CPU time a runner's target has used: this process's on the
// driver and for in-process nodes, each member's process's on a cluster. Two readings give
// how busy the target's cores were in between ([Usage.Since]).
type Usage struct {
	// Processes are the readings, one per process (per member on a cluster, by its actor
	// address), in the order of their names.
	Processes []ProcessUsage
	// Missing lists the cluster members that did not answer in time: their CPU is not
	// counted.
	Missing []string
}

// ProcessUsage is one process's reading.
type ProcessUsage struct {
	// Name is "local" for this process, else the member's actor address.
	Name string
	// Machine names the machine the process runs on: processes on one machine share its
	// cores (a member that does not say has a machine of its own).
	Machine string
	// CPUSeconds is the process's user and system CPU time since it started; Cores the
	// logical CPUs of its machine.
	CPUSeconds float64
	Cores      int
}

// Busy says how busy a target's cores were between two readings.
type Busy struct {
	// CPUSeconds is the CPU time the target's processes used in between; Cores the cores of
	// their machines (each machine counted once); Wall the seconds in between.
	CPUSeconds float64
	Cores      int
	Wall       float64
	// Share is CPUSeconds / (Wall x Cores): 1 when every core was busy all the time.
	Share float64
}

// Usage reads the CPU time of the runner's target, waiting up to timeout for a cluster's
// members. It fails only when the system reports no CPU time for this process (local
// targets) or no member answers.
func (r *Runner) Usage(timeout time.Duration) (Usage, error) {
	if r.remote == nil {
		s := cpuusage.Now()
		if !s.OK {
			return Usage{}, fmt.Errorf("usage: this system does not report the process's CPU time")
		}
		return Usage{Processes: []ProcessUsage{{Name: "local", Machine: "local", CPUSeconds: s.Seconds, Cores: s.Cores}}}, nil
	}
	var u Usage
	for _, m := range r.remote.Status(timeout) {
		if m.Load == nil {
			if m.Err != nil {
				u.Missing = append(u.Missing, m.Member.Name)
			}
			continue
		}
		machine := m.Load.Machine
		if machine == "" {
			machine = m.Load.Address
		}
		u.Processes = append(u.Processes, ProcessUsage{Name: m.Load.Address, Machine: machine,
			CPUSeconds: m.Load.CpuSeconds, Cores: int(m.Load.Cores)})
	}
	if len(u.Processes) == 0 {
		return u, fmt.Errorf("usage: no member of the cluster answered in %v", timeout)
	}
	slices.SortFunc(u.Processes, func(a, b ProcessUsage) int { return cmp.Compare(a.Name, b.Name) })
	return u, nil
}

// Since is how busy the cores were from the reading before to u, wall seconds apart. A
// process in u but not in before (it joined in between), or with less CPU time than before
// (it restarted), counts all its CPU time; one gone since before counts nothing.
func (u Usage) Since(before Usage, wall float64) Busy {
	prev := make(map[string]float64, len(before.Processes))
	for _, p := range before.Processes {
		prev[p.Name] = p.CPUSeconds
	}
	cores := map[string]int{}
	var b Busy
	for _, p := range u.Processes {
		d := p.CPUSeconds
		if s, ok := prev[p.Name]; ok && s <= d {
			d -= s
		}
		b.CPUSeconds += d
		cores[p.Machine] = max(cores[p.Machine], p.Cores)
	}
	for _, c := range cores {
		b.Cores += c
	}
	b.Wall = wall
	b.Share = cpuusage.Busy(b.CPUSeconds, wall, b.Cores)
	return b
}
