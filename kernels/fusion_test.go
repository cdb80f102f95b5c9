package kernels

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The packages whose arithmetic is pinned (see "Pinned arithmetic" in doc.go).
var pinnedPackages = []string{"./kernels", "./kernels/nnls"}

// Files another change owns for now: their lines are listed apart in the failure message.
var fusionOthersFiles = regexp.MustCompile(`^(cstep|gramkernel.*|gramlane.*|simd.*|kernelpath.*|roofline.*)\.go$`)

var (
	// A line of the compiler's -S listing: "\t0x0012 00018 (/path/file.go:12)\tVFMADD231SD\tX1, X0, X2".
	asmLine = regexp.MustCompile(`^\s+0x[0-9a-f]+ \d+ \((.+):(\d+)\)\t(\S+)(?:\t(.*))?$`)
	// The header of a function in the listing: "pkg.Func STEXT size=...".
	asmFunc = regexp.MustCompile(`^(\S+) STEXT`)
	// Every FMA3 (and AVX-512 FMA) form: VFMADD231SD, VFNMSUB213PD, VFMADDSUB231PD, ...
	fusedOp = regexp.MustCompile(`^VFN?M(ADD|SUB)`)
	// A direct call into the math package: "CALL math.cos(SB)".
	mathCall = regexp.MustCompile(`^(math\.\w+)\(SB\)`)
)

// fusion is one source line the GOAMD64=v3 compiler turned into fused multiply-adds.
type fusion struct {
	file string
	line int
	n    int    // fused instructions from that line
	via  string // for a call into math: the math function whose code is fused
}

// TestNoImplicitFusion compiles kernels and kernels/nnls (their package code, not their tests)
// for GOAMD64=v3, where the compiler may fuse x*y+z into one FMA instruction (and, having a
// memory operand for a multiply but not for an FMA, often does not: which expressions fuse
// depends on the compiler's choices, not only on the source), and fails for every source line
// that produced a fused instruction without asking for one with math.FMA: such a line rounds
// once under v3 and twice under v1, so the two builds would give different factors. Write it
// float64(x*y) + z (the explicit conversion forbids fusion) to keep the v1 bits everywhere.
//
// It also fails for a direct call to a function of package math whose own code the v3
// compiler fuses (math.Cos, say: the standard library is compiled with the same GOAMD64).
//
// It reads the compiler's own listing (go build -gcflags=-S) rather than disassembling the
// binary: go tool objdump does not decode the VEX-encoded FMA3 instructions (it prints
// VFMADD231SD as a MOVL and may fall out of step after it).
func TestNoImplicitFusion(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles two packages for GOAMD64=v3 (20-40 s from a cold cache); skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// Read every source file of the packages through the os package, so that go test's result
	// cache, which records the files a test opens, reruns this test when any of them changes
	// (the compiler the test runs reads them outside its view).
	for _, dir := range pinnedPackages {
		files, err := filepath.Glob(filepath.Join(root, dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".go") || strings.HasSuffix(f, ".s") {
				sourceLine(f, 0)
			}
		}
	}
	kernelsAsm := compileListing(t, goTool, root, append([]string{"build", "-o", os.DevNull, "-gcflags=-S"}, pinnedPackages...)...)
	mathAsm := compileListing(t, goTool, root, "build", "-o", os.DevNull, "-gcflags=math=-S", "math")

	fusedMath := fusedFunctions(mathAsm)
	found := map[string]*fusion{}
	var order []string
	add := func(file string, line int, via string) {
		if strings.HasSuffix(file, ".s") || strings.Contains(sourceLine(file, line), "math.FMA(") {
			return // an FMA the source asks for
		}
		key := fmt.Sprintf("%s:%d:%s", file, line, via)
		f := found[key]
		if f == nil {
			f = &fusion{file: file, line: line, via: via}
			found[key] = f
			order = append(order, key)
		}
		f.n++
	}
	fusedSeen := 0
	// Code inlined from another package carries that package's position; it is reported at
	// the last line of the module before it in the same function, the line that called it.
	var caller string
	var callerLine int
	sc := bufio.NewScanner(bytes.NewReader(kernelsAsm))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if asmFunc.MatchString(sc.Text()) {
			caller, callerLine = "", 0
			continue
		}
		m := asmLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		file, op, args := m[1], m[3], m[4]
		line, _ := strconv.Atoi(m[2])
		via := ""
		if inModule(root, file) {
			caller, callerLine = file, line
		} else if caller != "" {
			via = fmt.Sprintf("%s:%d", file, line)
			file, line = caller, callerLine
		}
		switch {
		case fusedOp.MatchString(op):
			fusedSeen++
			add(file, line, via)
		case op == "CALL":
			if c := mathCall.FindStringSubmatch(args); c != nil && fusedMath[c[1]] {
				add(file, line, c[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d fused instructions in the v3 listing, %d source lines fuse implicitly", fusedSeen, len(order))
	if len(order) == 0 {
		return
	}
	fs := make([]*fusion, 0, len(order))
	for _, key := range order {
		fs = append(fs, found[key])
	}
	slices.SortFunc(fs, func(a, b *fusion) int {
		if c := strings.Compare(a.file, b.file); c != 0 {
			return c
		}
		return a.line - b.line
	})
	var mine, others []string
	for _, f := range fs {
		rel := f.file
		if inModule(root, f.file) {
			rel, _ = filepath.Rel(root, f.file)
		}
		msg := fmt.Sprintf("%s:%d: %s", rel, f.line, strings.TrimSpace(sourceLine(f.file, f.line)))
		switch {
		case strings.HasPrefix(f.via, "math."):
			msg += fmt.Sprintf("    (calls %s, which the v3 compiler fuses)", f.via)
		case f.via != "":
			msg += fmt.Sprintf("    (%d fused, inlined from %s)", f.n, f.via)
		default:
			msg += fmt.Sprintf("    (%d fused)", f.n)
		}
		if fusionOthersFiles.MatchString(filepath.Base(f.file)) {
			others = append(others, msg)
		} else {
			mine = append(mine, msg)
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d source lines compile to fused multiply-adds under GOAMD64=v3 but not under v1, so the two "+
		"builds give different bits; write float64(a*b) + c (or use math.FMA where an FMA is meant):", len(order))
	if len(mine) > 0 {
		fmt.Fprintf(&sb, "\n\t%s", strings.Join(mine, "\n\t"))
	}
	if len(others) > 0 {
		fmt.Fprintf(&sb, "\n  in the DID Gram-form kernel files (cstep, gramkernel*, gramlane*, simd*, kernelpath*, roofline*):\n\t%s", strings.Join(others, "\n\t"))
	}
	t.Error(sb.String())
}

// compileListing runs the go command in the module root for GOAMD64=v3 and returns the
// compiler's listing (its standard error). The build cache replays the listing of a package it
// does not recompile.
func compileListing(t *testing.T, goTool, root string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(goTool, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOARCH=amd64", "GOAMD64=v3", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		out := stderr.Bytes()
		// Keep the error lines; the listing itself is long.
		var errs []string
		for _, l := range strings.Split(string(out), "\n") {
			if !asmLine.MatchString(l) && !asmFunc.MatchString(l) && !strings.HasPrefix(l, "\t0x") && strings.TrimSpace(l) != "" {
				errs = append(errs, l)
			}
		}
		if len(errs) > 40 {
			errs = errs[:40]
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, strings.Join(errs, "\n"))
	}
	return stderr.Bytes()
}

// fusedFunctions returns the functions of a listing that contain a fused instruction or call,
// directly or through other functions of the same listing, one that does.
func fusedFunctions(asm []byte) map[string]bool {
	fused := map[string]bool{}
	calls := map[string][]string{}
	var fn string
	sc := bufio.NewScanner(bytes.NewReader(asm))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := asmFunc.FindStringSubmatch(l); m != nil {
			fn = m[1]
			continue
		}
		m := asmLine.FindStringSubmatch(l)
		if m == nil || fn == "" {
			continue
		}
		switch op, args := m[3], m[4]; {
		case fusedOp.MatchString(op):
			fused[fn] = true
		case op == "CALL" || op == "JMP":
			if i := strings.Index(args, "(SB)"); i > 0 {
				calls[fn] = append(calls[fn], args[:i])
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for f, callees := range calls {
			if fused[f] {
				continue
			}
			for _, c := range callees {
				if fused[c] {
					fused[f], changed = true, true
					break
				}
			}
		}
	}
	return fused
}

// inModule reports whether file lies under the module root.
func inModule(root, file string) bool {
	rel, err := filepath.Rel(root, file)
	return err == nil && !strings.HasPrefix(rel, "..")
}

var sourceCache = map[string][]string{}

// sourceLine returns line n (1-based) of a source file, or "" when it cannot be read.
func sourceLine(file string, n int) string {
	lines, ok := sourceCache[file]
	if !ok {
		if b, err := os.ReadFile(file); err == nil {
			lines = strings.Split(string(b), "\n")
		}
		sourceCache[file] = lines
	}
	if n < 1 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}
