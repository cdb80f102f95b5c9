// Package browsertest drives a headless Chromium (Debian's chromium, or any Chrome) through
// the DevTools protocol with chromedp, for the tests of the dashboard: the HTTP service's
// with a stand-in backend, and a real cluster's. A test without a Chromium skips, saying how
// to install one (DIDNMF_CHROMIUM names a binary). Only tests import it.
//
// The browser records the page's JavaScript exceptions and its Content-Security-Policy
// refusals; every Wait fails the test on them.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Path finds a Chromium or Chrome binary, or "".
func Path() string {
	if p := os.Getenv("DIDNMF_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is a headless chromium with one tab; it records the page's JavaScript exceptions
// and the CSP refusals it logs, which fail the test.
type Browser struct {
	t   *testing.T
	ctx context.Context
	// Timeout bounds each wait (15 s unless changed: a real cluster's failure detection
	// needs more).
	Timeout  time.Duration
	mu       sync.Mutex
	problems []string
}

// New starts a headless Chromium for the test (it is stopped when the test ends), or skips
// the test, saying how to install one, when none is found.
func New(t *testing.T) *Browser {
	t.Helper()
	bin := Path()
	if bin == "" {
		t.Skip("no chromium: apt-get install -y chromium (Debian), or set DIDNMF_CHROMIUM to a Chromium or Chrome binary")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox (CI and containers run as root).
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	br := &Browser{t: t, ctx: ctx, Timeout: 15 * time.Second}
	// The first Run starts the browser, on a context without a deadline (it lives as long as
	// the context).
	if err := chromedp.Listen(ctx, br.listen); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	return br
}

func (br *Browser) listen(ev any) {
	br.mu.Lock()
	defer br.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		br.problems = append(br.problems, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
	case *log.EventEntryAdded:
		if ev.Entry.Source == log.EntrySourceSecurity || strings.Contains(ev.Entry.Text, "Content Security Policy") {
			br.problems = append(br.problems, "security: "+ev.Entry.Text)
		}
	}
}

// Check fails the test with the page's exceptions and CSP refusals, if any.
func (br *Browser) Check() {
	br.t.Helper()
	br.mu.Lock()
	defer br.mu.Unlock()
	if len(br.problems) > 0 {
		br.t.Fatalf("the page had problems:\n%s", strings.Join(br.problems, "\n"))
	}
}

// Do runs actions under a 60 s limit: a limit against a browser that hangs, not a timing
// check (CI saw a viewport change take more than 20 s on cores shared with a cluster's job).
func (br *Browser) Do(what string, actions ...chromedp.Action[chromedp.Void]) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		br.t.Fatalf("%s: %v", what, err)
	}
}

// Wait waits until the JavaScript expression is truthy; on timeout it fails with the value of
// show (an expression that explains what the page shows instead).
func (br *Browser) Wait(what, expr, show string) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, br.Timeout+5*time.Second)
	defer cancel()
	poll := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(br.Timeout))
	if _, err := chromedp.Run(ctx, poll); err != nil {
		got, _ := evalString(br.ctx, show)
		br.t.Fatalf("%s: %v\nthe page shows: %s", what, err, got)
	}
	br.Check()
}

func evalString(ctx context.Context, expr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[string]("String("+expr+")"))
}

// Eval returns a JavaScript expression's value as a string.
func (br *Browser) Eval(expr string) string {
	br.t.Helper()
	s, err := evalString(br.ctx, expr)
	if err != nil {
		br.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// Screenshot saves a screenshot of the whole page, as PNG, to path, under a 60 s limit: a
// full-page capture by a browser starved of CPU (CI's cores shared with a 2-thread job) once
// took more than 20 s, and the picture proves nothing about time.
func (br *Browser) Screenshot(path string) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 60*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		br.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		br.t.Fatal(err)
	}
	br.t.Logf("screenshot: %s", path)
}

// ScreenshotPaths returns where the desktop and the phone screenshots go: $DIDNMF_SCREENSHOT
// (else a file in the test's temporary directory) and the same name with -390 before its
// extension.
func ScreenshotPaths(t *testing.T) (desktop, phone string) {
	desktop = os.Getenv("DIDNMF_SCREENSHOT")
	if desktop == "" {
		desktop = filepath.Join(t.TempDir(), "dashboard.png")
	}
	ext := filepath.Ext(desktop)
	return desktop, strings.TrimSuffix(desktop, ext) + "-390" + ext
}
