package server

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
)

// Environment variables that make a node profile itself from Start until Close, for finding
// where a cluster's time goes (bench --procs passes its environment to its `node serve`
// processes):
//
//   - DIDNMF_CPUPROFILE=PREFIX writes a CPU profile (go tool pprof) to PREFIX.NAME.cpu.pprof;
//   - DIDNMF_TRACE=PREFIX writes an execution trace (go tool trace: goroutine wake-ups,
//     scheduling, network waits) to PREFIX.NAME.trace;
//
// NAME is the node's name (its bind address when it has none), so that the nodes of one
// machine write files of their own. A profile that cannot be started is reported on the
// node's logger and the node runs without it.
const (
	CPUProfileEnv = "DIDNMF_CPUPROFILE"
	TraceEnv      = "DIDNMF_TRACE"
)

// profiles holds the profiles a node writes; stop ends them.
type profiles struct {
	cpu, trace *os.File
}

// startProfiles starts what the environment asks for; problems are returned, not fatal.
func startProfiles(name string) (*profiles, []error) {
	p := &profiles{}
	var errs []error
	name = strings.NewReplacer("/", "-", ":", "-", "[", "", "]", "").Replace(name)
	if prefix := os.Getenv(CPUProfileEnv); prefix != "" {
		f, err := os.Create(prefix + "." + name + ".cpu.pprof")
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			} else {
				p.cpu = f
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", CPUProfileEnv, err))
		}
	}
	if prefix := os.Getenv(TraceEnv); prefix != "" {
		f, err := os.Create(prefix + "." + name + ".trace")
		if err == nil {
			if err = trace.Start(f); err != nil {
				f.Close()
			} else {
				p.trace = f
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", TraceEnv, err))
		}
	}
	return p, errs
}

// stop ends the profiles and closes their files.
func (p *profiles) stop() {
	if p == nil {
		return
	}
	if p.cpu != nil {
		pprof.StopCPUProfile()
		p.cpu.Close()
		p.cpu = nil
	}
	if p.trace != nil {
		trace.Stop()
		p.trace.Close()
		p.trace = nil
	}
}

// StartProfiles starts the profiles the environment asks for (see CPUProfileEnv and
// TraceEnv) under the given name, for commands other than serve that want to be profiled
// (node bench profiles its timed run with it). It returns the function that stops them and
// the problems met starting them, which are not fatal.
func StartProfiles(name string) (stop func(), errs []error) {
	p, errs := startProfiles(name)
	return p.stop, errs
}
