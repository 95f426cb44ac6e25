package worker

import (
	"sync"
)

// maxLogChunkBytes bounds one execute.log chunk. The host drops chunks over
// 1,000,000 UTF-16 units; a UTF-8 byte count is never below the unit count,
// so this bound keeps every chunk well inside the limit.
const maxLogChunkBytes = 512 << 10

// maxPendingLogBytes bounds output read but not yet sent: past it, the reader
// waits for the host pipe, so memory stays flat however fast a command prints.
const maxPendingLogBytes = 8 << 20

// logRelay collects a running command's output (for the final result) and
// forwards every new byte to the host as execute.log notifications. One
// goroutine, owned by the relay, does the sending: whatever arrives while it
// writes is coalesced into the next notification, so a chatty command costs
// few notifications and a quiet one is forwarded at once.
type logRelay struct {
	send func(stream, chunk string) error

	mu      sync.Mutex
	cond    *sync.Cond
	pending []logSegment
	bytes   int
	closed  bool
	carry   [2][]byte // per stream: a rune split by the last segment

	out  [2]blockBuffer
	done chan struct{}
}

type logSegment struct {
	stream int // 0 stdout, 1 stderr
	data   []byte
}

var streamNames = [2]string{"stdout", "stderr"}

func newLogRelay(send func(stream, chunk string) error) *logRelay {
	r := &logRelay{send: send, done: make(chan struct{})}
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
	if len(p) == 0 {
		return 0, nil
	}
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.bytes >= maxPendingLogBytes && !r.closed {
		r.cond.Wait()
	}
	r.out[w.i].Write(p)
	if r.closed {
		return len(p), nil
	}
	if n := len(r.pending); n > 0 && r.pending[n-1].stream == w.i {
		r.pending[n-1].data = append(r.pending[n-1].data, p...)
	} else {
		r.pending = append(r.pending, logSegment{stream: w.i, data: append([]byte(nil), p...)})
	}
	r.bytes += len(p)
	r.cond.Broadcast()
	return len(p), nil
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
		r.pending = nil
		r.bytes = 0
		closing := r.closed
		r.cond.Broadcast()
		r.mu.Unlock()
		for _, seg := range batch {
			r.forward(seg.stream, seg.data, false)
		}
		if closing {
			r.forward(0, nil, true)
			r.forward(1, nil, true)
			return
		}
		r.mu.Lock()
	}
}

// forward sends data (after any carried partial rune) in chunks that end on
// rune boundaries; at the end the carry goes out as it is.
func (r *logRelay) forward(stream int, data []byte, final bool) {
	if c := r.carry[stream]; len(c) > 0 {
		data = append(c, data...)
		r.carry[stream] = nil
	}
	if !final {
		if tail := incompleteTail(data); tail > 0 {
			r.carry[stream] = append([]byte(nil), data[len(data)-tail:]...)
			data = data[:len(data)-tail]
		}
	}
	for len(data) > 0 {
		n := min(len(data), maxLogChunkBytes)
		if n < len(data) {
			n -= incompleteTail(data[:n])
		}
		// A send error means the host is gone; the result will fail too.
		_ = r.send(streamNames[stream], string(data[:n]))
		data = data[n:]
	}
}

// close stops accepting output, sends everything still pending and returns
// once the host has it all. Call it before replying to the execute.
func (r *logRelay) close() {
	r.mu.Lock()
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	<-r.done
}

// sent returns how many bytes of each stream have been collected.
func (r *logRelay) collected(stream int) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out[stream].Len()
}
