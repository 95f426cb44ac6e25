package output

import (
	"io"
	"slices"
	"sync"
)

// maxLogChunkBytes bounds one execute.log chunk. The host drops chunks over
// 1,000,000 UTF-16 units; a UTF-8 byte count is never below the unit count,
// so this bound keeps every chunk well inside the limit.
const maxLogChunkBytes = 512 << 10

// chunkBytesFor is the largest chunk whose notification stays within a
// line of lineLimit UTF-16 units (0: the host's own, far above the chunk
// bound): a byte escapes to at most 6 (\u00XX), and the envelope with the
// invocation id takes under 1 Ki. Only a host whose line limit was lowered
// (DAYTONA_WORKER_MAX_MESSAGE_CHARS) gets smaller chunks.
func chunkBytesFor(lineLimit int64) int {
	if lineLimit <= 0 {
		return maxLogChunkBytes
	}
	return int(max(4, min(int64(maxLogChunkBytes), (lineLimit-1024)/6)))
}

// maxPendingLogBytes bounds output read but not yet handed to the sender:
// past it, the reader waits for the host pipe, so a command that prints
// faster than the host reads does not race ahead of it.
const maxPendingLogBytes = 8 << 20

// Relay collects a running command's output (for the final result) and
// forwards every new byte to the host as execute.log notifications. One
// goroutine, owned by the relay, does the sending: whatever arrives while it
// writes is coalesced into the next notification, so a chatty command costs
// few notifications and a quiet one is forwarded at once.
//
// Output is stored once: the notifications are encoded straight from the
// result's blocks (bytes in a Buffer never move or change once
// written), so relaying costs no copy and no garbage per byte.
type Relay struct {
	deliver func(stream int, chunk [][]byte) error
	// chunkBytes bounds one chunk (chunkBytesFor).
	chunkBytes int
	// limit is the most UTF-16 units the result can carry (see trimMiddle);
	// 0 keeps all of the output.
	limit int64

	mu      sync.Mutex
	cond    *sync.Cond
	pending []logSegment // output not yet handed to the sender, in order
	spare   []logSegment
	bytes   int
	// maxPending is maxPendingLogBytes, unless a test lowers it.
	maxPending int
	closed     bool
	sending    bool           // the sender goroutine has been started
	next       [2]blockCursor // where each stream's first pending byte is in out

	carry   [2][]byte // sender only: a rune split by the last segment
	scratch []byte    // sender only: the notification encoding buffer
	sent    [2]int64  // sender only: each stream's bytes handed to deliver
	quota   logCap    // sender only: the host's bound of what is streamed

	out  [2]Buffer
	done chan struct{}
}

// logSegment is a run of n bytes of one stream (0 stdout, 1 stderr).
type logSegment struct {
	stream int
	n      int
}

// StreamName names stream i (0 stdout, 1 stderr) as execute.log does.
func StreamName(i int) string { return [2]string{"stdout", "stderr"}[i] }

// Limits are the host's bounds a relay keeps to, in UTF-16 units
// (zero: none).
type Limits struct {
	// Result is the most a result can carry: a stream sure to be longer
	// drops its relayed middle (see trimMiddle).
	Result int64
	// Streamed is the most of one execute's output the host takes in
	// execute.log (see logCap).
	Streamed int64
}

// NewRelay relays a command's output to notify as execute.log notifications:
// the params (an rpc.JSONStreamer, {"stream","chunk"} as
// protocol.ExecuteLog encodes) are written straight from the output blocks.
func NewRelay(limits Limits, notify func(params any) error) *Relay {
	var r *Relay
	r = startLogRelay(func(stream int, chunk [][]byte) error {
		before := r.sent
		n := int64(runLen(chunk))
		r.sent[stream] += n
		if !r.quota.admit(r, chunk, n, before) {
			return nil // the host would drop it; the escape map stops here
		}
		return notify(&logChunk{stream: StreamName(stream), chunk: chunk, scratch: &r.scratch,
			escapes: &r.out[stream].escapes, at: before[stream]})
	})
	r.quota = logCap{limit: limits.Streamed}
	r.limit = limits.Result
	r.chunkBytes = chunkBytesFor(limits.Result)
	return r
}

// logCap keeps the host's bound of what one execute streams: the host adds
// up the characters (UTF-16 units) of the execute.log chunks it takes and
// drops any chunk that would take the sum past MAX_EXECUTE_LOG_TOTAL_CHARS
// (128 Mi), unparsed for the run log but parsed as a line first. A command
// printing without end would have the host parse, and drop, all it prints:
// the host's one JavaScript thread, which serves all of Paperclip, busy for
// as long as the command runs. So the relay sends only the chunks the host
// takes. It counts nothing while the bytes sent (never fewer than their
// units) are within the bound; once they may not be, or once the relay is
// about to drop sent output it would then have to count (trimMiddle), it
// counts what was sent, then each chunk.
type logCap struct {
	limit     int64 // 0: no bound
	exact     bool  // delivered is counted (from count on)
	delivered int64 // units of the chunks the host took, once exact
}

// admit reports whether the host takes a chunk of n bytes, the first
// before bytes of each stream having been sent already. Only the relay's
// sender calls it.
func (c *logCap) admit(r *Relay, chunk [][]byte, n int64, before [2]int64) bool {
	if c.limit <= 0 {
		return true
	}
	if !c.exact {
		if before[0]+before[1]+n <= c.limit {
			return true
		}
		c.count(r, before)
		if c.limit == 0 {
			return true // cannot be counted: sent as the plugin sends
		}
	}
	units := textUnits(&Buffer{blocks: chunk, n: n}, n)
	if c.delivered+units > c.limit {
		return false
	}
	c.delivered += units
	return true
}

// mayLoseCount reports whether trimMiddle could drop output sent while the
// cap was not counting: a stream is past the result limit. Call it under
// r.mu, which serialises Write.
func (c *logCap) mayLoseCount(r *Relay) bool {
	return c.limit > 0 && !c.exact && (r.out[0].n > r.limit || r.out[1].n > r.limit)
}

// count starts counting, from the units of the first sent bytes of each
// stream.
func (c *logCap) count(r *Relay, sent [2]int64) {
	units, ok := r.sentUnits(sent)
	if !ok {
		c.limit = 0 // cannot be counted any more: send all, as the plugin does
		return
	}
	c.exact, c.delivered = true, units
}

// sentUnits counts the UTF-16 units of the output already sent, the first
// sent bytes of each stream (false once a stream dropped its middle, which
// the relay's sender avoids by counting first: mayLoseCount). The bytes
// sent never change, so only the list of blocks is read under the lock.
func (r *Relay) sentUnits(sent [2]int64) (int64, bool) {
	var units int64
	for i := range r.out {
		r.mu.Lock()
		b := &r.out[i]
		if b.holed() {
			r.mu.Unlock()
			return 0, false
		}
		view := &Buffer{blocks: slices.Clone(b.blocks), n: b.n}
		r.mu.Unlock()
		units += textUnits(view, sent[i])
	}
	return units, true
}

// startLogRelay returns a relay whose sender starts with the first output:
// a command that prints nothing costs no goroutine.
func startLogRelay(deliver func(stream int, chunk [][]byte) error) *Relay {
	r := &Relay{deliver: deliver, chunkBytes: maxLogChunkBytes, maxPending: maxPendingLogBytes, done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// Stream returns an io.Writer for stdout (0) or stderr (1).
func (r *Relay) Stream(i int) io.Writer { return &relayWriter{r: r, i: i} }

// Output returns what stream i collected. Read it only after Close.
func (r *Relay) Output(i int) *Buffer { return &r.out[i] }

type relayWriter struct {
	r *Relay
	i int
}

func (w *relayWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.bytes >= r.maxPending && !r.closed {
		r.cond.Wait()
	}
	r.out[w.i].Write(p)
	if r.closed {
		return len(p), nil
	}
	if !r.sending {
		r.sending = true
		go r.run()
	}
	if n := len(r.pending); n > 0 && r.pending[n-1].stream == w.i {
		r.pending[n-1].n += len(p)
	} else {
		r.pending = append(r.pending, logSegment{stream: w.i, n: len(p)})
	}
	r.bytes += len(p)
	r.cond.Broadcast()
	return len(p), nil
}

// run sends pending output until the relay is closed and drained.
func (r *Relay) run() {
	defer close(r.done)
	r.mu.Lock()
	for {
		for len(r.pending) == 0 && !r.closed {
			r.cond.Wait()
		}
		batch := r.pending
		views := make([][][]byte, len(batch))
		for i, seg := range batch {
			views[i] = r.out[seg.stream].take(&r.next[seg.stream], seg.n)
		}
		r.pending, r.spare = r.spare[:0], nil
		r.bytes = 0
		closing := r.closed
		r.cond.Broadcast()
		r.mu.Unlock()
		for i, seg := range batch {
			r.forward(seg.stream, views[i], false)
		}
		if closing {
			r.forward(0, nil, true)
			r.forward(1, nil, true)
			return
		}
		r.mu.Lock()
		r.spare = batch[:0]
		if r.limit > 0 {
			if r.quota.mayLoseCount(r) {
				// Count what was sent while it is all still here. Bytes
				// before r.next never change, so the writer may go on.
				r.mu.Unlock()
				r.quota.count(r, r.sent)
				r.mu.Lock()
			}
			// The host has had everything before r.next.
			r.out[0].trimMiddle(&r.next[0], r.limit)
			r.out[1].trimMiddle(&r.next[1], r.limit)
		}
	}
}

// forward sends data (after any carried partial rune) in chunks that end on
// rune boundaries; at the end the carry goes out as it is.
func (r *Relay) forward(stream int, data [][]byte, final bool) {
	if c := r.carry[stream]; len(c) > 0 {
		data = append([][]byte{c}, data...)
		r.carry[stream] = nil
	}
	total := runLen(data)
	if !final {
		if tail := incompleteTail(runSuffix(data, 3)); tail > 0 {
			var rest [][]byte
			data, rest = splitRun(data, total-tail)
			r.carry[stream] = runBytes(rest)
			total -= tail
		}
	}
	for total > 0 {
		n := min(total, r.chunkBytes)
		head, rest := splitRun(data, n)
		if n < total {
			if cut := incompleteTail(runSuffix(head, 3)); cut > 0 {
				n -= cut
				head, rest = splitRun(data, n)
			}
		}
		// A send error means the host is gone; the result will fail too.
		_ = r.deliver(stream, head)
		data, total = rest, total-n
	}
}

// Close stops accepting output, sends everything still pending and returns
// once the host has it all. Call it before replying to the execute.
func (r *Relay) Close() {
	r.mu.Lock()
	r.closed = true
	sending := r.sending
	r.cond.Broadcast()
	r.mu.Unlock()
	if sending {
		<-r.done
	}
}

// logChunk is the params of one execute.log notification, {"stream","chunk"}
// as protocol.ExecuteLog encodes, written without building the string.
type logChunk struct {
	stream  string
	chunk   [][]byte
	scratch *[]byte // reused between notifications (one sender at a time)
	// escapes, if set, learns where chunk (at that offset of its stream)
	// needs escaping, for the result to reuse (see escapeMap).
	escapes *escapeMap
	at      int64
}

// WriteJSON implements rpc.JSONStreamer.
func (c *logChunk) WriteJSON(w io.Writer) error {
	e := jsonStringWriter{w: w, buf: (*c.scratch)[:0]}
	if c.escapes != nil && c.escapes.continuesAt(c.at) {
		e.m = c.escapes
	}
	e.buf = append(e.buf, `{"stream":"`...)
	e.buf = append(e.buf, c.stream...)
	e.buf = append(e.buf, `","chunk":"`...)
	for _, p := range c.chunk {
		if err := e.write(p); err != nil {
			return err
		}
	}
	if err := e.finish(); err != nil {
		return err
	}
	e.buf = append(e.buf, `"}`...)
	err := e.flush()
	*c.scratch = e.buf[:0]
	return err
}

// ---- runs: a byte string held as consecutive pieces ----

func runLen(run [][]byte) int {
	n := 0
	for _, p := range run {
		n += len(p)
	}
	return n
}

// runSuffix copies out the last (up to) k bytes of run.
func runSuffix(run [][]byte, k int) []byte {
	var out []byte
	for i := len(run) - 1; i >= 0 && len(out) < k; i-- {
		p := run[i]
		take := min(k-len(out), len(p))
		out = append(append([]byte(nil), p[len(p)-take:]...), out...)
	}
	return out
}

// splitRun cuts run after n bytes.
func splitRun(run [][]byte, n int) (head, tail [][]byte) {
	for i, p := range run {
		if n == 0 {
			return head, run[i:]
		}
		if len(p) <= n {
			head = append(head, p)
			n -= len(p)
			continue
		}
		head = append(head, p[:n:n])
		return head, append([][]byte{p[n:]}, run[i+1:]...)
	}
	return head, nil
}

// runBytes copies run into one slice.
func runBytes(run [][]byte) []byte {
	out := make([]byte, 0, runLen(run))
	for _, p := range run {
		out = append(out, p...)
	}
	return out
}
