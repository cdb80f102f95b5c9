package cli

// A headless Chromium for the dashboard's tests, driven through the DevTools protocol with
// chromedp. This file depends on nothing of the package: a test elsewhere (a real cluster's)
// can take it as it is.

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

// chromiumPath finds a Chromium or Chrome binary, or "".
func chromiumPath() string {
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

// browser is a headless chromium with one tab; it records the page's JavaScript exceptions
// and the CSP refusals it logs, which fail the test.
type browser struct {
	t   *testing.T
	ctx context.Context
	// timeout bounds each wait (15 s unless changed: a real cluster's failure detection
	// needs more).
	timeout  time.Duration
	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	bin := chromiumPath()
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
	br := &browser{t: t, ctx: ctx, timeout: 15 * time.Second}
	// The first Run starts the browser, on a context without a deadline (it lives as long as
	// the context).
	if err := chromedp.Listen(ctx, br.listen); err != nil {
		t.Fatalf("start chromium %s: %v", bin, err)
	}
	return br
}

func (br *browser) listen(ev any) {
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

// check fails the test with the page's exceptions and CSP refusals, if any.
func (br *browser) check() {
	br.t.Helper()
	br.mu.Lock()
	defer br.mu.Unlock()
	if len(br.problems) > 0 {
		br.t.Fatalf("the page had problems:\n%s", strings.Join(br.problems, "\n"))
	}
}

// do runs actions under a 20 s limit.
func (br *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		br.t.Fatalf("%s: %v", what, err)
	}
}

// wait waits until the JavaScript expression is truthy; on timeout it fails with the value of
// show (an expression that explains what the page shows instead).
func (br *browser) wait(what, expr, show string) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, br.timeout+5*time.Second)
	defer cancel()
	poll := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(br.timeout))
	if _, err := chromedp.Run(ctx, poll); err != nil {
		got, _ := evalString(br.ctx, show)
		br.t.Fatalf("%s: %v\nthe page shows: %s", what, err, got)
	}
	br.check()
}

func evalString(ctx context.Context, expr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[string]("String("+expr+")"))
}

// eval returns a JavaScript expression's value as a string.
func (br *browser) eval(expr string) string {
	br.t.Helper()
	s, err := evalString(br.ctx, expr)
	if err != nil {
		br.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

func (br *browser) screenshot(path string) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 20*time.Second)
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

// screenshotPaths returns where the desktop and the phone screenshots go.
func screenshotPaths(t *testing.T) (desktop, phone string) {
	desktop = os.Getenv("DIDNMF_SCREENSHOT")
	if desktop == "" {
		desktop = filepath.Join(t.TempDir(), "dashboard.png")
	}
	ext := filepath.Ext(desktop)
	return desktop, strings.TrimSuffix(desktop, ext) + "-390" + ext
}
