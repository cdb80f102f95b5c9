package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"0-3", []int{0, 1, 2, 3}},
		{"4-5,0,2", []int{0, 2, 4, 5}},
		{"1,1, 1", []int{1}},
		{"1023", []int{1023}},
	} {
		got, err := parseCPUList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "x", "3-1", "-1", "1024", "0-", ",", "0,,1", "1.5"} {
		if got, err := parseCPUList(bad); err == nil {
			t.Errorf("%q: parsed as %v", bad, got)
		}
	}
}

func TestShareOut(t *testing.T) {
	for _, c := range []struct {
		cpus []int
		n    int
		want string
	}{
		{[]int{0, 1}, 2, "[[0] [1]]"},
		{[]int{0, 1}, 3, "[[0] [1] [0]]"},
		{[]int{0, 1, 2, 3}, 2, "[[0 1] [2 3]]"},
		{[]int{0, 1, 2, 3, 4}, 2, "[[0 1] [2 3]]"},
		{[]int{2, 5}, 1, "[[2 5]]"},
	} {
		if got := fmt.Sprint(shareOut(c.cpus, c.n)); got != c.want {
			t.Errorf("%v to %d: %s, want %s", c.cpus, c.n, got, c.want)
		}
	}
}

// TestServePinsToCPUs: serve --cpus restricts every thread of the node to those CPUs.
func TestServePinsToCPUs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("--cpus is Linux only")
	}
	allowed, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu := fmt.Sprint(allowed[len(allowed)-1])
	p := startServe(t, "pinned", "--cpus", cpu)
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p.Cmd.Process.Pid))
	if err != nil || len(tasks) < 2 {
		t.Fatalf("the node's threads: %v, %v", tasks, err)
	}
	for _, task := range tasks {
		status, err := os.ReadFile(task)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != cpu {
				t.Errorf("%s: CPUs %s, want %s", task, strings.TrimSpace(v), cpu)
			}
		}
	}
}

// TestBenchPinNeedsProcs: --pin without --procs is a usage error.
func TestBenchPinNeedsProcs(t *testing.T) {
	code, stdout, stderr := runNode(t, "bench", "--input", "synthetic:m=3,n=30,k=2,seed=1", "--rank", "2", "--pin")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "--pin needs --procs") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and --pin needs --procs", code, stdout, stderr)
	}
}
