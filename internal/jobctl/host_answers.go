package jobctl

import (
	"crypto/subtle"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
)

// Kept answers. A job's answer (its JobResult or JobError) goes from its coordinator to its
// client once, and the coordinator stops. If that message is lost (a connection that broke),
// the client's next lease renewal finds the coordinator gone; it then asks the coordinator's
// host, which keeps the answers of the jobs that ended on it for a while (HostKeepAnswers: an
// older one is never given out), and sends it again.

// Bounds on the answers a host keeps: how many, how many bytes in all, and for how long.
const (
	HostKeptAnswers     = 256
	HostKeptAnswerBytes = 64 << 20
	HostKeepAnswers     = 10 * time.Minute
)

// keptAnswer is an answer a host keeps for a client that may ask again.
type keptAnswer struct {
	token  string
	answer proto.Message
	size   int
	at     time.Time
}

// keepAnswer keeps a job's answer, dropping the expired ones and then the oldest while the
// bounds would be passed; an answer larger than all of them is not kept.
func (h *Host) keepAnswer(e HostAnswerKept) {
	size := proto.Size(e.Answer)
	if size > HostKeptAnswerBytes {
		return
	}
	total := 0
	for job, a := range h.answers {
		if a.expired(e.At) {
			delete(h.answers, job)
		} else {
			total += a.size
		}
	}
	for len(h.answers) > 0 && (len(h.answers) >= HostKeptAnswers || total+size > HostKeptAnswerBytes) {
		oldest := ""
		for job, a := range h.answers {
			if o, ok := h.answers[oldest]; !ok || a.at.Before(o.at) || a.at.Equal(o.at) && job < oldest {
				oldest = job
			}
		}
		total -= h.answers[oldest].size
		delete(h.answers, oldest)
	}
	h.answers[e.Job] = keptAnswer{token: e.Token, answer: e.Answer, size: size, at: e.At}
}

// expired tells whether an answer was kept longer than HostKeepAnswers at now.
func (a keptAnswer) expired(now time.Time) bool { return now.Sub(a.at) > HostKeepAnswers }

// answerAgain answers a client's LeaseRenew sent to the host (its job's coordinator is gone)
// with the job's kept answer when the client owns the job (its token) and the answer has not
// expired (it is dropped then), and with a LeaseAck otherwise (nothing kept: the client keeps
// waiting for a coordinator).
func (h *Host) answerAgain(e HostLeaseRenew) {
	m := e.Renew
	a, ok := h.answers[m.JobId]
	if ok && a.expired(e.At) {
		delete(h.answers, m.JobId)
		ok = false
	}
	if ok && a.token != "" && subtle.ConstantTimeCompare([]byte(m.OwnerToken), []byte(a.token)) == 1 {
		h.ready.Reply = a.answer
		return
	}
	h.ready.Reply = &messages.LeaseAck{JobId: m.JobId}
}
