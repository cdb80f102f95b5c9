package kernels

import (
	"bufio"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestMakeFloatsHugePages: a large slice from makeFloats is zeroed and, where the system gives
// transparent huge pages on request, its memory is advised for them ("hg" in the mapping's
// VmFlags) while it lives, and advised against them ("nh") once it died, so that the heap's
// later use of the range does not get huge pages nobody asked for.
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
	if !thpOnRequest() {
		t.Skip("transparent huge pages are not given on request here (not in madvise mode)")
	}
	for i := range s {
		s[i] = 1
	}
	addr := uint64(uintptr(unsafe.Pointer(&s[n/2])))
	m, ok := mappingAt(t, addr)
	if !ok {
		t.Fatalf("no mapping of /proc/self/smaps holds %#x", addr)
	}
	// The huge pages themselves depend on what the kernel has free and on whether the range
	// was touched before (memory the heap reused): logged, not asserted.
	t.Logf("while alive: flags %v, %d kB of huge pages", m.flags, m.hugeKB)
	if !slices.Contains(m.flags, "hg") {
		t.Errorf("a %d MB slice from makeFloats: its mapping's flags %v lack hg (MADV_HUGEPAGE)", 8*n>>20, m.flags)
	}
	runtime.KeepAlive(s)
	s = nil
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		m, ok = mappingAt(t, addr)
		if ok && slices.Contains(m.flags, "nh") && !slices.Contains(m.flags, "hg") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the slice died its range's flags are %v, want nh (MADV_NOHUGEPAGE) and no hg", m.flags)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// smapsEntry is what TestMakeFloatsHugePages reads of a mapping in /proc/self/smaps.
type smapsEntry struct {
	hugeKB int
	flags  []string
}

// mappingAt returns the mapping of /proc/self/smaps that holds addr.
func mappingAt(t *testing.T, addr uint64) (smapsEntry, bool) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	var e smapsEntry
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			if in {
				return e, true
			}
			lo, hi, _ := strings.Cut(r, "-")
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && a <= addr && addr < b
			continue
		}
		if !in {
			continue
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			e.hugeKB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			e.flags = strings.Fields(v)
		}
	}
	return e, in
}
