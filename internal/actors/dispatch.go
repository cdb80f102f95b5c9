package actors

import "time"

// mailboxThroughput is how many messages an actor handles in one pass of its mailbox before
// it lets others run: protoactor's default.
const mailboxThroughput = 300

// runnerIdle is how long a mailbox runner goroutine waits for another pass before it exits.
const runnerIdle = time.Second

// mailboxRunner is the dispatcher of a node's actors. protoactor's default starts a goroutine
// for every pass of a mailbox, that is, each time an idle actor gets a message: a shard or a
// reducer gets one or two an iteration. Each new goroutine then grows its stack again to the
// depth of a shard's step (runtime.morestack and copystack were 1.5% of three serve
// processes' CPU at 1e6, newproc and goexit 1% more). A mailboxRunner hands a pass to a
// goroutine that ran an earlier one and waits for more (its stack already grown), and starts
// a goroutine only when none waits; a goroutine that waited runnerIdle for a pass exits.
//
// Schedule may be called from any goroutine; passes run concurrently, as with protoactor's
// dispatcher (a mailbox never schedules a second pass while one runs).
type mailboxRunner struct {
	// work is unbuffered: a send succeeds only when a runner waits on it.
	work chan func()
}

func newMailboxRunner() *mailboxRunner { return &mailboxRunner{work: make(chan func())} }

// Schedule implements actor.Dispatcher.
func (r *mailboxRunner) Schedule(fn func()) {
	select {
	case r.work <- fn:
	default:
		go r.run(fn)
	}
}

// Throughput implements actor.Dispatcher.
func (r *mailboxRunner) Throughput() int { return mailboxThroughput }

// run runs fn, then the passes handed to it, until it waited runnerIdle for one.
func (r *mailboxRunner) run(fn func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(runnerIdle)
		select {
		case fn = <-r.work:
		case <-idle.C:
			return
		}
	}
}
