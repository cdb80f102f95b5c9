package matio

import (
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"
)

// A deflated member of an .npz cannot be read from the middle: a Read of samples [lo, hi)
// inflates its indices and values from the start of the member. When a process reads several
// ranges of the same file at once (a node running several shards of one input, each with its
// own Source), each would inflate the same prefix again: 4 shards, 2.5 times the file. The
// inflate hub shares one decompression of a member among the readers that want bytes it has
// not yet reached: one goroutine inflates the member a chunk at a time, and every reader whose
// range a chunk overlaps copies its part before the next chunk is published (a reader joins a
// stream only ahead of it, else starts one of its own). Memory: two chunks a stream.

// sharedChunk is the size of the chunks a shared stream publishes (a variable for the tests).
var sharedChunk int64 = 256 << 10

// fileRef counts the users of an open file: the Source that opened it and the streams that
// inflate from it; the last to release it closes it.
type fileRef struct {
	f *os.File
	n atomic.Int32
}

func newFileRef(f *os.File) *fileRef {
	r := &fileRef{f: f}
	r.n.Store(1)
	return r
}

func (r *fileRef) acquire() { r.n.Add(1) }

func (r *fileRef) release() error {
	if r.n.Add(-1) == 0 {
		return r.f.Close()
	}
	return nil
}

// memberKey identifies a deflated member of a file.
type memberKey struct {
	info        os.FileInfo
	off, csize  int64
	usize       int64
	sizeAndTime [2]int64
}

func (k memberKey) same(o memberKey) bool {
	return k.off == o.off && k.csize == o.csize && k.usize == o.usize && k.sizeAndTime == o.sizeAndTime &&
		os.SameFile(k.info, o.info)
}

// inflateHub holds the shared streams in progress.
type inflateHub struct {
	mu      sync.Mutex
	streams []*sharedStream
}

var hub inflateHub

// sharedStream inflates one member once, for its subscribers.
type sharedStream struct {
	key  memberKey
	ref  *fileRef
	mu   sync.Mutex
	cond sync.Cond
	// guarded by mu
	pos     int64  // member offset of chunk[0]
	chunk   []byte // the published chunk
	subs    map[*sharedReader]bool
	pending int   // subscribers yet to take their part of the chunk
	err     error // the inflater's error, for readers still wanting bytes
	done    bool
}

// sharedReader reads member bytes [at, end) from a shared stream.
type sharedReader struct {
	s       *sharedStream
	at, end int64
	counted bool // the published chunk holds bytes of ours not yet taken
}

// subscribe returns a reader of member bytes [start, end) of the deflated member at off
// (csize bytes, inflating to usize) in ref's file, joining a stream of the same member that
// has not yet passed start, or starting one.
func (h *inflateHub) subscribe(ref *fileRef, key memberKey, start, end int64) *sharedReader {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.streams {
		if !s.key.same(key) {
			continue
		}
		s.mu.Lock()
		if !s.done && start >= s.pos+int64(len(s.chunk)) {
			r := &sharedReader{s: s, at: start, end: end}
			s.subs[r] = true
			s.mu.Unlock()
			return r
		}
		s.mu.Unlock()
	}
	s := &sharedStream{key: key, ref: ref, subs: map[*sharedReader]bool{}}
	s.cond.L = &s.mu
	r := &sharedReader{s: s, at: start, end: end}
	s.subs[r] = true
	h.streams = append(h.streams, s)
	ref.acquire()
	go s.run(h)
	return r
}

// run inflates the member and publishes it a chunk at a time, each once every subscriber it
// concerns has taken the previous one, until no subscriber is left or the data ends.
func (s *sharedStream) run(h *inflateHub) {
	defer s.ref.release()
	fr := flate.NewReader(io.NewSectionReader(s.ref.f, s.key.off, s.key.csize))
	defer fr.Close()
	size := int(min(sharedChunk, max(s.key.usize, 0)))
	bufs := [2][]byte{make([]byte, size), make([]byte, size)}
	var produced int64
	for i := 0; ; i ^= 1 {
		next := bufs[i][:min(int64(size), max(s.key.usize-produced, 0))]
		n, err := io.ReadFull(fr, next)
		produced += int64(n)
		if err == nil && len(next) == 0 {
			err = io.EOF // the member is all out
		}
		s.mu.Lock()
		for s.pending > 0 {
			s.cond.Wait()
		}
		if len(s.subs) == 0 {
			s.mu.Unlock()
			if s.retire(h) {
				return
			}
			s.mu.Lock()
		}
		if n > 0 {
			s.pos += int64(len(s.chunk))
			s.chunk = next[:n]
			end := s.pos + int64(n)
			for r := range s.subs {
				if r.at < end && r.end > s.pos && r.at >= s.pos {
					r.counted = true
					s.pending++
				}
			}
		}
		if err != nil {
			if err == io.EOF && n > 0 {
				err = nil // publish this chunk first; EOF comes with the next
			} else {
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					err = io.ErrUnexpectedEOF
				}
				s.err = err
				s.done = true
			}
		}
		s.cond.Broadcast()
		done := s.done
		s.mu.Unlock()
		if done {
			// Readers still wanting bytes get the error; take the stream out of the hub.
			h.mu.Lock()
			h.remove(s)
			h.mu.Unlock()
			return
		}
	}
}

// retire takes s out of the hub when it still has no subscriber, and reports whether it did.
func (s *sharedStream) retire(h *inflateHub) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) > 0 {
		return false
	}
	s.done = true
	h.remove(s)
	return true
}

// remove takes s out of the hub's list; h.mu is held.
func (h *inflateHub) remove(s *sharedStream) {
	for i, t := range h.streams {
		if t == s {
			h.streams = append(h.streams[:i], h.streams[i+1:]...)
			return
		}
	}
}

// Read copies the reader's next bytes from the published chunk, waiting for the chunk that
// holds them.
func (r *sharedReader) Read(p []byte) (int, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if r.at >= r.end {
			return 0, io.EOF
		}
		cs, ce := s.pos, s.pos+int64(len(s.chunk))
		if r.counted && cs <= r.at && r.at < ce {
			k := copy(p, s.chunk[r.at-cs:min(ce, r.end)-cs])
			r.at += int64(k)
			if r.at == ce || r.at == r.end {
				r.take()
			}
			return k, nil
		}
		if s.err != nil {
			return 0, s.err
		}
		if s.done {
			return 0, io.ErrUnexpectedEOF
		}
		s.cond.Wait()
	}
}

// take records that the reader has what it wants of the published chunk; s.mu is held.
func (r *sharedReader) take() {
	if r.counted {
		r.counted = false
		r.s.pending--
		if r.s.pending == 0 {
			r.s.cond.Broadcast()
		}
	}
}

// Close leaves the stream.
func (r *sharedReader) Close() error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	r.take()
	delete(s.subs, r)
	s.cond.Broadcast()
	return nil
}
