package actors

import (
	"google.golang.org/protobuf/proto"
)

// A job's answer (its JobResult or JobError) goes from its coordinator to its client once,
// and the coordinator stops. If that message is lost (a connection that broke), the client's
// next lease renewal finds the coordinator gone; it then asks the coordinator's host, which
// keeps the answers of the jobs that ended on it for a while (jobctl.Host decides which, and
// answers the renewal), and sends it again.

// answerKept is a coordinator handing its job's answer to its host as it ends.
type answerKept struct {
	job, token string
	answer     proto.Message
}
