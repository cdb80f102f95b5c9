package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
)

// A job's answer (its JobResult or JobError) goes from its coordinator to its client once,
// and the coordinator stops. If that message is lost (a connection that broke), the client's
// next lease renewal finds the coordinator gone; it then asks the coordinator's host, which
// keeps the answers of the jobs that ended on it for a while, and sends it again.

// Bounds on the answers a host keeps: how many, how many bytes in all, and for how long.
const (
	maxKeptAnswers     = 256
	maxKeptAnswerBytes = 64 << 20
	keepAnswers        = 10 * time.Minute
)

// answerKept is a coordinator handing its job's answer to its host as it ends.
type answerKept struct {
	job, token string
	answer     proto.Message
}

// keptAnswer is an answer a host keeps for a client that may ask again.
type keptAnswer struct {
	token  string
	answer proto.Message
	size   int
	at     time.Time
}

// keepAnswer keeps a job's answer, dropping the expired ones and then the oldest while the
// bounds would be passed; an answer larger than all of them is not kept.
func (h *host) keepAnswer(m *answerKept) {
	size := proto.Size(m.answer)
	if size > maxKeptAnswerBytes {
		return
	}
	now := time.Now()
	total := 0
	for job, a := range h.answers {
		if now.Sub(a.at) > keepAnswers {
			delete(h.answers, job)
		} else {
			total += a.size
		}
	}
	for len(h.answers) > 0 && (len(h.answers) >= maxKeptAnswers || total+size > maxKeptAnswerBytes) {
		oldest := ""
		for job, a := range h.answers {
			if oldest == "" || a.at.Before(h.answers[oldest].at) {
				oldest = job
			}
		}
		total -= h.answers[oldest].size
		delete(h.answers, oldest)
	}
	h.answers[m.job] = keptAnswer{token: m.token, answer: m.answer, size: size, at: now}
}

// answerAgain answers a client's LeaseRenew sent to the host (its job's coordinator is
// gone) with the job's kept answer when the client owns the job, and with a LeaseAck
// otherwise (nothing kept: the client keeps waiting for a coordinator).
func (h *host) answerAgain(ctx actor.Context, m *messages.LeaseRenew) {
	if a, ok := h.answers[m.JobId]; ok && sameToken(m.OwnerToken, a.token) {
		h.respond(ctx, a.answer)
		return
	}
	h.respond(ctx, &messages.LeaseAck{JobId: m.JobId})
}
