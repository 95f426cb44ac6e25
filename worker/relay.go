package worker

import (
	"io"
	"sync"
)

// maxLogChunkBytes bounds one execute.log chunk as escaped JSON. The host
// drops chunks over 1,000,000 UTF-16 units; a chunk's escaped length is never
// below its length in units, so this bound keeps every chunk well inside it.
const maxLogChunkBytes = 512 << 10

// maxLogWriteBytes is the most output escaped at once: at worst six bytes of
// JSON per byte (\u0000), it still fits one chunk.
const maxLogWriteBytes = 64 << 10

// maxPendingLogBytes bounds output escaped but not yet handed to the sender:
// past it, the reader waits for the host pipe, so a command that prints
// faster than the host reads does not race ahead of it.
const maxPendingLogBytes = 8 << 20

// logRelay collects a running command's output (for the final result) and
// forwards every new byte to the host as execute.log notifications. One
// goroutine, owned by the relay, does the sending: whatever arrives while it
// writes is coalesced into the next notification, so a chatty command costs
// few notifications and a quiet one is forwarded at once.
//
// Output is stored once, already escaped for JSON (escapedText): the
// notifications are written straight from the result's blocks (bytes in a
// blockBuffer never move or change once written), so relaying costs no
// escaping, no copy and no garbage per byte.
type logRelay struct {
	deliver func(stream int, chunk [][]byte) error

	mu      sync.Mutex
	cond    *sync.Cond
	pending []logSegment // escaped output not yet handed to the sender, in order
	spare   []logSegment
	bytes   int
	closed  bool
	next    [2]blockCursor // where each stream's first pending byte is in out

	scratch []byte // sender only: the notification encoding buffer

	out  [2]escapedText
	done chan struct{}
}

// logSegment is a run of n escaped bytes of one stream (0 stdout, 1 stderr)
// that starts and ends where a JSON string may be cut: one notification.
type logSegment struct {
	stream int
	n      int
}

var streamNames = [2]string{"stdout", "stderr"}

// newLogNotifier relays execute.log notifications to notify, whose params
// (an rpc.JSONStreamer) are written straight from the output blocks.
func newLogNotifier(notify func(params any) error) *logRelay {
	var r *logRelay
	r = startLogRelay(func(stream int, chunk [][]byte) error {
		return notify(&logChunk{stream: streamNames[stream], chunk: chunk, scratch: &r.scratch})
	})
	return r
}

func startLogRelay(deliver func(stream int, chunk [][]byte) error) *logRelay {
	r := &logRelay{deliver: deliver, done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	go r.run()
	return r
}

// stream returns an io.Writer for stdout (0) or stderr (1).
func (r *logRelay) stream(i int) *relayWriter { return &relayWriter{r: r, i: i} }

type relayWriter struct {
	r *logRelay
	i int
}

func (w *relayWriter) Write(p []byte) (int, error) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	written := len(p)
	for len(p) > 0 {
		for r.bytes >= maxPendingLogBytes && !r.closed {
			r.cond.Wait()
		}
		piece := p[:min(len(p), maxLogWriteBytes)]
		p = p[len(piece):]
		out := &r.out[w.i]
		before := out.body.Len()
		out.write(piece)
		if !r.closed {
			r.enqueueLocked(w.i, int(out.body.Len()-before))
		}
	}
	return written, nil
}

// enqueueLocked hands the sender n more escaped bytes of stream, coalesced
// with the pending run of the same stream while the chunk bound allows.
func (r *logRelay) enqueueLocked(stream, n int) {
	if n == 0 {
		return
	}
	if k := len(r.pending); k > 0 && r.pending[k-1].stream == stream && r.pending[k-1].n+n <= maxLogChunkBytes {
		r.pending[k-1].n += n
	} else {
		r.pending = append(r.pending, logSegment{stream: stream, n: n})
	}
	r.bytes += n
	r.cond.Broadcast()
}

// run sends pending output until the relay is closed and drained.
func (r *logRelay) run() {
	defer close(r.done)
	r.mu.Lock()
	for {
		for len(r.pending) == 0 && !r.closed {
			r.cond.Wait()
		}
		batch := r.pending
		views := make([][][]byte, len(batch))
		for i, seg := range batch {
			views[i] = r.out[seg.stream].body.take(&r.next[seg.stream], seg.n)
		}
		r.pending, r.spare = r.spare[:0], nil
		r.bytes = 0
		closing := r.closed
		r.cond.Broadcast()
		r.mu.Unlock()
		for i, seg := range batch {
			// A send error means the host is gone; the result will fail too.
			_ = r.deliver(seg.stream, views[i])
		}
		if closing {
			return
		}
		r.mu.Lock()
		r.spare = batch[:0]
	}
}

// close stops accepting output, sends everything still pending (an
// incomplete rune at the very end included) and returns once the host has
// it all. Call it before replying to the execute.
func (r *logRelay) close() {
	r.mu.Lock()
	if !r.closed {
		for i := range r.out {
			before := r.out[i].body.Len()
			r.out[i].finish()
			r.enqueueLocked(i, int(r.out[i].body.Len()-before))
		}
		r.closed = true
		r.cond.Broadcast()
	}
	r.mu.Unlock()
	<-r.done
}

// collected returns how many output bytes of each stream have been collected.
func (r *logRelay) collected(stream int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out[stream].rawLen()
}

// logChunk is the params of one execute.log notification, {"stream","chunk"}
// as protocol.ExecuteLog encodes, with the chunk already escaped.
type logChunk struct {
	stream  string
	chunk   [][]byte
	scratch *[]byte // reused between notifications (one sender at a time)
}

// WriteJSON implements rpc.JSONStreamer.
func (c *logChunk) WriteJSON(w io.Writer) error {
	head := append((*c.scratch)[:0], `{"stream":"`...)
	head = append(head, c.stream...)
	head = append(head, `","chunk":"`...)
	*c.scratch = head
	if _, err := w.Write(head); err != nil {
		return err
	}
	for _, p := range c.chunk {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, `"}`)
	return err
}
