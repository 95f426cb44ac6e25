package pty

import (
	"errors"
	"sync"
)

// errDropped ends a terminal's reader once nobody will read its output any
// more (the route closed, the worker is shutting down, the Sink failed).
var errDropped = errors.New("pty: output no longer wanted")

// outbox is a session's bounded queue of terminal output, between the PTY
// socket's reader (Write) and the pump that hands it to the Sink (take).
// A full outbox blocks Write, which stops the reader, so a slow host slows
// the PTY socket down instead of growing the queue.
type outbox struct {
	limit int

	mu      sync.Mutex
	buf     []byte
	spare   []byte // a taken buffer given back, reused by the next Write
	dropped bool

	more  chan struct{} // a token when data was added
	space chan struct{} // a token when data was taken
	gone  chan struct{} // closed by drop
	full  chan struct{} // a token each time a Write has to wait (for tests)
}

func newOutbox(limit int) *outbox {
	return &outbox{
		limit: limit,
		more:  make(chan struct{}, 1),
		space: make(chan struct{}, 1),
		gone:  make(chan struct{}),
		full:  make(chan struct{}, 1),
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Write queues p, waiting while the outbox holds limit bytes or more. It
// fails once the outbox is dropped.
func (o *outbox) Write(p []byte) (int, error) {
	for {
		o.mu.Lock()
		if o.dropped {
			o.mu.Unlock()
			return 0, errDropped
		}
		if len(o.buf) < o.limit {
			if o.buf == nil && o.spare != nil {
				o.buf, o.spare = o.spare, nil
			}
			o.buf = append(o.buf, p...)
			o.mu.Unlock()
			signal(o.more)
			return len(p), nil
		}
		o.mu.Unlock()
		signal(o.full)
		select {
		case <-o.space:
		case <-o.gone:
		}
	}
}

type takeResult int

const (
	taken   takeResult = iota // data returned
	drained                   // the writer has ended and everything was taken
	dropped                   // the output is no longer wanted
)

// take waits for queued output and returns all of it; give the slice back
// with release. ended is closed once no Write can come any more.
func (o *outbox) take(ended <-chan struct{}) ([]byte, takeResult) {
	for {
		o.mu.Lock()
		if o.dropped {
			o.mu.Unlock()
			return nil, dropped
		}
		if len(o.buf) > 0 {
			b := o.buf
			o.buf = nil
			o.mu.Unlock()
			signal(o.space)
			return b, taken
		}
		o.mu.Unlock()
		select {
		case <-o.more:
		case <-o.gone:
		case <-ended:
			o.mu.Lock()
			empty := len(o.buf) == 0 && !o.dropped
			o.mu.Unlock()
			if empty {
				return nil, drained
			}
		}
	}
}

// release gives a taken slice back for reuse.
func (o *outbox) release(b []byte) {
	if cap(b) > 2*o.limit {
		return
	}
	o.mu.Lock()
	if o.spare == nil {
		o.spare = b[:0]
	}
	o.mu.Unlock()
}

// drop discards what is queued and makes every later Write fail.
func (o *outbox) drop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dropped {
		return
	}
	o.dropped = true
	o.buf, o.spare = nil, nil
	close(o.gone)
}

// buffered is how many bytes wait in the outbox.
func (o *outbox) buffered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf)
}
