package actors

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// A node's warnings and errors can repeat as fast as the network delivers what causes them (a
// flood of failed handshakes, a peer that sends the same bad message over and over): one line
// each would fill a disk and drown the lines that matter. The node's logger therefore lets a
// warning or error through at most once every logEvery for each message (its level and
// text; the attributes may differ), and the next line of that message that goes through
// carries how many were suppressed since ("suppressed"). Lines below warning pass as they
// are.
const (
	logEvery = time.Second
	// logKeys bounds the messages remembered; past it, the oldest is forgotten (its
	// suppressed count is lost, its next line goes through).
	logKeys = 1024
)

// rateLimited is a slog.Handler that rate-limits the warnings and errors of the handler it
// wraps (see logEvery). Its methods may be called from any goroutine; handlers made by
// WithAttrs and WithGroup share its counts.
type rateLimited struct {
	next  slog.Handler
	state *logRates
}

// logRates is what the handlers of one logger share: when each message last went through and
// how many of it were suppressed since.
type logRates struct {
	mu    sync.Mutex
	every time.Duration
	seen  map[logKey]*logRate
	order []logKey // oldest first, to forget
}

type logKey struct {
	level slog.Level
	msg   string
}

type logRate struct {
	last       time.Time
	suppressed int64
}

// rateLimit returns logger's handler wrapped so that its warnings and errors are rate-limited.
func rateLimit(logger *slog.Logger, every time.Duration) *slog.Logger {
	return slog.New(&rateLimited{next: logger.Handler(), state: &logRates{every: every, seen: map[logKey]*logRate{}}})
}

// Enabled implements slog.Handler.
func (h *rateLimited) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler: a warning or error goes through when its message did not
// in the last interval, with the count of those suppressed since.
func (h *rateLimited) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	suppressed, ok := h.state.admit(logKey{r.Level, r.Message}, r.Time)
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64("suppressed", suppressed))
	}
	return h.next.Handle(ctx, r)
}

// admit tells whether a line of key at now goes through, and how many of key were suppressed
// since the last that did.
func (s *logRates) admit(key logKey, now time.Time) (suppressed int64, ok bool) {
	if now.IsZero() {
		now = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.seen[key]
	if r == nil {
		if len(s.order) >= logKeys {
			delete(s.seen, s.order[0])
			s.order = s.order[1:]
		}
		s.seen[key] = &logRate{last: now}
		s.order = append(s.order, key)
		return 0, true
	}
	if now.Sub(r.last) < s.every {
		r.suppressed++
		return 0, false
	}
	suppressed, r.suppressed, r.last = r.suppressed, 0, now
	return suppressed, true
}

// WithAttrs implements slog.Handler.
func (h *rateLimited) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &rateLimited{next: h.next.WithAttrs(attrs), state: h.state}
}

// WithGroup implements slog.Handler.
func (h *rateLimited) WithGroup(name string) slog.Handler {
	return &rateLimited{next: h.next.WithGroup(name), state: h.state}
}
