package actors

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogRateLimit logs lines at given times through a rate-limited logger and checks which
// go through, and the suppressed counts they carry.
func TestLogRateLimit(t *testing.T) {
	var out bytes.Buffer
	logger := rateLimit(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})), time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	log := func(at time.Duration, level slog.Level, msg string) {
		r := slog.NewRecord(t0.Add(at), level, msg, 0)
		r.AddAttrs(slog.Int("n", int(at/time.Millisecond)))
		if err := logger.Handler().Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 { // 1000 errors in 100 ms: one goes through
		log(time.Duration(i)*100*time.Microsecond, slog.LevelError, "handshake failed")
	}
	log(50*time.Millisecond, slog.LevelWarn, "handshake failed")    // another level: its own
	log(60*time.Millisecond, slog.LevelError, "another error")      // another message: its own
	log(70*time.Millisecond, slog.LevelInfo, "handshake failed")    // info: never limited
	log(80*time.Millisecond, slog.LevelInfo, "handshake failed")    // info: never limited
	log(1100*time.Millisecond, slog.LevelError, "handshake failed") // a second later: through, with the count
	log(1200*time.Millisecond, slog.LevelError, "handshake failed") // suppressed
	log(2200*time.Millisecond, slog.LevelError, "handshake failed") // through, 1 suppressed
	want := []string{
		`level=ERROR msg="handshake failed" n=0`,
		`level=WARN msg="handshake failed" n=50`,
		`level=ERROR msg="another error" n=60`,
		`level=INFO msg="handshake failed" n=70`,
		`level=INFO msg="handshake failed" n=80`,
		`level=ERROR msg="handshake failed" n=1100 suppressed=999`,
		`level=ERROR msg="handshake failed" n=2200 suppressed=1`,
	}
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLogRateLimitForgetsOldMessages: past logKeys messages, the oldest is forgotten.
func TestLogRateLimitForgetsOldMessages(t *testing.T) {
	s := &logRates{every: time.Second, seen: map[logKey]*logRate{}}
	now := time.Now()
	for i := range logKeys + 10 {
		if _, ok := s.admit(logKey{slog.LevelError, strings.Repeat("x", i)}, now); !ok {
			t.Fatalf("message %d suppressed at its first line", i)
		}
	}
	if len(s.seen) != logKeys || len(s.order) != logKeys {
		t.Fatalf("%d messages remembered (%d in order), at most %d", len(s.seen), len(s.order), logKeys)
	}
	if _, ok := s.admit(logKey{slog.LevelError, ""}, now); !ok {
		t.Fatal("a forgotten message suppressed")
	}
}

// TestGuardLogsDropsWithTheirCount: the guard logs a drop at most once a second, and the next
// line counts the drops since the last.
func TestGuardLogsDropsWithTheirCount(t *testing.T) {
	var out bytes.Buffer
	g := newGuard(false, slog.New(slog.NewTextHandler(&out, nil)))
	for range 1000 {
		g.drop(dropUnknownType, 1)
	}
	g.mu.Lock()
	g.lastLog = g.lastLog.Add(-2 * time.Second)
	g.mu.Unlock()
	g.drop(dropSerializer, 2)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "dropped=1") || !strings.Contains(lines[1], `cause="not protobuf" dropped=1001`) {
		t.Fatalf("lines:\n%s\nwant two, the second counting 1001 drops", out.String())
	}
	if d := g.Drops(); d[dropUnknownType] != 1000 || d[dropSerializer] != 2 {
		t.Fatalf("counters %v", dropsSorted(d))
	}
}
