package actors

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/messages"
)

// Large payloads (partials and results of collectives, factors, checkpoint copies, streamed
// blocks) travel in chunks: see package internal/chunked, whose Chunk every such message
// carries.

// isCorruption tells whether err comes from a chunk whose checksum did not match: the data was
// corrupted on its way, and the job fails rather than compute with it.
func isCorruption(err error) bool { return errors.Is(err, chunked.ErrChecksum) }

// takeChunk adds a chunk of a collective's result to a, counting a duplicate in c. Once the
// payload is whole it returns it, with true, and resets a for the next one.
func takeChunk(a *chunked.Assembly[float64], chunk *messages.Chunk, c *messages.Counters) ([]float64, bool, error) {
	full, err := a.Add(chunk)
	if errors.Is(err, chunked.ErrDuplicate) {
		c.Duplicates++
		return nil, false, nil
	}
	if err != nil || !full {
		return nil, false, err
	}
	data := a.Data()
	*a = chunked.Assembly[float64]{}
	return data, true, nil
}

// pidOf converts a wire Pid to protoactor's.
func pidOf(p *messages.Pid) *actor.PID {
	if p == nil {
		return nil
	}
	return actor.NewPID(p.Address, p.Id)
}

// wirePid converts a protoactor PID to the wire form.
func wirePid(p *actor.PID) *messages.Pid {
	if p == nil {
		return nil
	}
	return &messages.Pid{Address: p.Address, Id: p.Id}
}
