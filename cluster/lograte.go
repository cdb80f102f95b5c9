package cluster

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Rate limit of repeated log lines: a line of a kind already logged in the last logEvery is
// suppressed; at the end of that second one line says how many were, with the last of them.
// A kind is the line with its numbers, addresses and quoted names masked (see lineKind), so
// 20,000 garbage datagrams from 20,000 ports make two lines a second, not 20,000.
const (
	logEvery    = time.Second
	maxLogKinds = 256 // kinds tracked at once; beyond, the new kinds share one
)

// limiter rate-limits the lines logged to l by kind. Its methods are safe for concurrent use.
type limiter struct {
	l     *slog.Logger
	every time.Duration

	mu    sync.Mutex
	kinds map[string]*window
}

// window is a kind's current second: until when, and what was suppressed in it.
type window struct {
	until      time.Time
	suppressed int64
	level      slog.Level
	last       string
}

func newLimiter(l *slog.Logger, every time.Duration) *limiter {
	return &limiter{l: l, every: every, kinds: map[string]*window{}}
}

// log logs msg at level unless a line of its kind was logged in the current window.
func (r *limiter) log(level slog.Level, msg string, attrs ...any) {
	ctx := context.Background()
	if !r.l.Enabled(ctx, level) {
		return
	}
	key := lineKind(msg)
	now := time.Now()
	r.mu.Lock()
	w := r.kinds[key]
	if w == nil && len(r.kinds) >= maxLogKinds {
		for k, old := range r.kinds {
			if !now.Before(old.until) {
				delete(r.kinds, k) // a pending flush keeps its window
			}
		}
		if len(r.kinds) >= maxLogKinds {
			key = "(other kinds)"
			w = r.kinds[key]
		}
	}
	if w != nil && now.Before(w.until) {
		r.suppress(w, now, level, msg)
		r.mu.Unlock()
		return
	}
	// A new window; the flush of the one before, if due, reports that one.
	r.kinds[key] = &window{until: now.Add(r.every)}
	r.mu.Unlock()
	r.l.Log(ctx, level, msg, attrs...)
}

// suppress counts a suppressed line of w's kind and has the count reported at the window's
// end. It runs under r.mu.
func (r *limiter) suppress(w *window, now time.Time, level slog.Level, msg string) {
	w.suppressed++
	w.level, w.last = level, msg
	if w.suppressed == 1 {
		time.AfterFunc(w.until.Sub(now), func() { r.flush(w) })
	}
}

// flush reports the lines of w's kind suppressed in its window.
func (r *limiter) flush(w *window) {
	r.mu.Lock()
	n, level, last := w.suppressed, w.level, w.last
	r.mu.Unlock()
	if n > 0 {
		r.l.Log(context.Background(), level, "log lines suppressed (one a second of each kind is logged)",
			slog.Int64("suppressed", n), slog.String("last", last))
	}
}

// lineKind masks what varies between lines of one kind: every run of digits, hex digits,
// dots, colons and brackets that holds a digit (numbers, IP addresses, ports) becomes "#",
// and every quoted string ('...' or "...") becomes '*'.
func lineKind(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	isAddr := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '.' || c == ':' || c == '[' || c == ']'
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c == '\'' || c == '"' {
			if j := strings.IndexByte(s[i+1:], c); j >= 0 {
				b.WriteString("'*'")
				i += j + 2
				continue
			}
		}
		if isAddr(c) {
			j, digit := i, false
			for j < len(s) && isAddr(s[j]) {
				digit = digit || s[j] >= '0' && s[j] <= '9'
				j++
			}
			if digit {
				b.WriteByte('#')
			} else {
				b.WriteString(s[i:j])
			}
			i = j
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}
