package kernels

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestMakeFloatsHugePages: a large slice from makeFloats is zeroed and, where the system gives
// transparent huge pages on request, backed by them once touched (the mapping that holds it
// reports AnonHugePages in /proc/self/smaps).
func TestMakeFloatsHugePages(t *testing.T) {
	const n = 64 << 20 / 8
	s := makeFloats(n)
	if len(s) != n {
		t.Fatalf("len %d, want %d", len(s), n)
	}
	for i, v := range s {
		if v != 0 {
			t.Fatalf("entry %d is %v, want 0", i, v)
		}
	}
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skipf("transparent huge pages are not offered on request here (%q, %v)", mode, err)
	}
	for i := range s {
		s[i] = 1
	}
	addr := uint64(uintptr(unsafe.Pointer(&s[n/2])))
	huge, found := anonHugeKB(t, addr)
	if !found {
		t.Fatalf("no mapping of /proc/self/smaps holds %#x", addr)
	}
	t.Logf("the mapping holding the slice has %d kB of huge pages", huge)
	if huge == 0 {
		t.Errorf("a %d MB slice from makeFloats has no huge pages once touched", 8*n>>20)
	}
}

// anonHugeKB returns the AnonHugePages of the mapping of /proc/self/smaps that holds addr.
func anonHugeKB(t *testing.T, addr uint64) (kb int, found bool) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			lo, hi, _ := strings.Cut(r, "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && a <= addr && addr < b
			continue
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok && in {
			kb, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return kb, true
		}
	}
	return 0, false
}
