package workerhost

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/internal/jsonstream"
)

// Message is one line the worker wrote, as jsonstream decodes it: objects
// are map[string]any, numbers json.Number, and strings the options choose
// jsonstream.Text (digested) or jsonstream.Bytes (valid only during the
// callback that receives the message).
type Message map[string]any

// Method is the message's method ("" for a reply).
func (m Message) Method() string { s, _ := m["method"].(string); return s }

// Params are the message's params (nil unless an object).
func (m Message) Params() map[string]any { p, _ := m["params"].(map[string]any); return p }

// Invocation is the paperclipInvocationId the message carries.
func (m Message) Invocation() string { s, _ := m["paperclipInvocationId"].(string); return s }

// ID is the message's id and whether it has one (a null id counts).
func (m Message) ID() (any, bool) { id, ok := m["id"]; return id, ok }

// Reply is the worker's answer to a request.
type Reply struct {
	Result any
	Error  map[string]any // nil for a result
	At     time.Time      // when it was read
	Msg    Message
}

// Request is one request to send.
type Request struct {
	Method string
	// Params are encoded with encoding/json, except a json.RawMessage,
	// which is written as it is (a large payload is not scanned again).
	Params any
	// ID is the request's id; nil takes the connection's next.
	ID any
	// Members are further top-level members (paperclipInvocation).
	Members map[string]any
	// OnReply, if set, sees the reply on the reading goroutine before the
	// waiter does, in order with the notifications around it.
	OnReply func(Reply)
}

// Options configure a Conn. Callbacks run on the reading goroutine, one
// message at a time in the order the worker wrote them.
type Options struct {
	// NewID makes the id of the nth request that has none (default n).
	NewID func(n int64) any
	// Notify sees every notification.
	Notify func(Message)
	// Serve answers a request of the worker; its answer is written without
	// holding up the reading. Nil answers every request method-not-found.
	Serve func(Message) (result any, err *Error)
	// Unmatched sees every reply no request waits for (a null id, an id
	// never sent or already answered).
	Unmatched func(Message)
	// Hash, NewDigest and Raw configure the decoding (jsonstream.Reader).
	Hash      func(path []string) bool
	NewDigest func() hash.Hash64
	Raw       func(path []string) bool
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// ErrNoReply reports a request whose reply never came: the worker's output
// ended first.
var ErrNoReply = errors.New("the worker's output ended without a reply")

// Conn is a JSON-RPC connection to a worker. Its reading goroutine ends when
// the worker's output does (Process.Close forces that).
type Conn struct {
	w    io.Writer
	opts Options

	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	sent    int64            // calls sent so far, numbering them in order
	waiting map[string]*Call // by idKey
	readErr error
	ended   bool // the output ended: no reply will come

	serving sync.WaitGroup // answers being written
	done    chan struct{}
}

// Call is a request in flight.
type Call struct {
	ID     any
	Method string
	Sent   time.Time
	req    Request
	seq    int64      // the order it was sent in (calls of one Send share Sent)
	ch     chan Reply // gets the reply, or is closed without one
	conn   *Conn
}

// NewConn reads messages from r, writes to w, and starts the reading
// goroutine.
func NewConn(w io.Writer, r io.Reader, opts Options) *Conn {
	if opts.NewID == nil {
		opts.NewID = func(n int64) any { return n }
	}
	c := &Conn{w: w, opts: opts, waiting: map[string]*Call{}, done: make(chan struct{})}
	go c.read(r)
	return c
}

// Done is closed once the worker's output has ended and every pending
// call has been released.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why reading stopped: nil at a clean end of output, ErrPartialLine
// when it ended inside a line.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

func (c *Conn) read(r io.Reader) {
	defer close(c.done)
	tail := &lastByte{r: r}
	dec := jsonstream.NewReader(bufio.NewReaderSize(tail, 4<<20))
	dec.Hash, dec.NewDigest, dec.Raw = c.opts.Hash, c.opts.NewDigest, c.opts.Raw
	for {
		v, err := dec.Next()
		if err != nil {
			c.serving.Wait()
			c.mu.Lock()
			switch {
			case !isEnd(err):
				c.readErr = err
			case tail.last != 0 && tail.last != '\n':
				c.readErr = ErrPartialLine
			}
			c.ended = true
			for _, call := range c.waiting {
				close(call.ch) // it stays in Pending
			}
			c.mu.Unlock()
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			c.mu.Lock()
			if c.readErr == nil {
				c.readErr = fmt.Errorf("a line that is no JSON object: %.200v", v)
			}
			c.mu.Unlock()
			continue
		}
		c.dispatch(Message(m))
	}
}

// lastByte remembers the last byte read through it.
type lastByte struct {
	r    io.Reader
	last byte
}

func (l *lastByte) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}

// isEnd tells a clean end of output (EOF, or the output closed by Close).
func isEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed)
}

func (c *Conn) dispatch(m Message) {
	id, hasID := m.ID()
	switch {
	case m.Method() != "" && hasID:
		c.serve(m, id)
	case m.Method() != "":
		if c.opts.Notify != nil {
			c.opts.Notify(m)
		}
	default:
		c.reply(m, id)
	}
}

func (c *Conn) reply(m Message, id any) {
	key := idKey(id)
	c.mu.Lock()
	call := c.waiting[key]
	delete(c.waiting, key)
	c.mu.Unlock()
	if call == nil {
		if c.opts.Unmatched != nil {
			c.opts.Unmatched(m)
		}
		return
	}
	r := Reply{Result: m["result"], At: time.Now(), Msg: m}
	r.Error, _ = m["error"].(map[string]any)
	if call.req.OnReply != nil {
		call.req.OnReply(r)
	}
	call.ch <- r
}

func (c *Conn) serve(m Message, id any) {
	var result any
	rpcErr := &Error{Code: -32601, Message: "Method not found: " + m.Method()}
	if c.opts.Serve != nil {
		result, rpcErr = c.opts.Serve(m)
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if rpcErr != nil {
		msg["error"] = rpcErr
	} else {
		msg["result"] = result
	}
	line, err := json.Marshal(msg)
	if err != nil {
		c.mu.Lock()
		c.readErr = fmt.Errorf("encoding the answer to %s: %w", m.Method(), err)
		c.mu.Unlock()
		return
	}
	// Written aside: the worker may be blocked writing to us while its
	// input is full.
	c.serving.Add(1)
	go func() {
		defer c.serving.Done()
		_ = c.Write(append(line, '\n'))
	}()
}

// Write writes raw bytes to the worker in one write (lines that are not
// requests, or several at once).
func (c *Conn) Write(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.w.Write(b)
	return err
}

// Send encodes the requests and writes them in one write, as a busy host
// does.
func (c *Conn) Send(reqs ...Request) ([]*Call, error) {
	var buf bytes.Buffer
	calls := make([]*Call, len(reqs))
	now := time.Now()
	for i, r := range reqs {
		if r.ID == nil {
			c.mu.Lock()
			c.nextID++
			n := c.nextID
			c.mu.Unlock()
			r.ID = c.opts.NewID(n)
		}
		if err := encodeRequest(&buf, r); err != nil {
			return nil, err
		}
		calls[i] = &Call{ID: r.ID, Method: r.Method, Sent: now, req: r, ch: make(chan Reply, 1), conn: c}
	}
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", reqs[0].Method, ErrNoReply)
	}
	for _, call := range calls {
		c.sent++
		call.seq = c.sent
		c.waiting[idKey(call.ID)] = call
	}
	c.mu.Unlock()
	if err := c.Write(buf.Bytes()); err != nil {
		return calls, fmt.Errorf("writing %s: %w", reqs[0].Method, err)
	}
	return calls, nil
}

// Call sends one request and waits for its reply.
func (c *Conn) Call(ctx context.Context, r Request) (Reply, error) {
	calls, err := c.Send(r)
	if err != nil {
		return Reply{}, err
	}
	return calls[0].Wait(ctx)
}

// Pending lists the calls without a reply, oldest first; once the output
// has ended, those that never got one.
func (c *Conn) Pending() []*Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Call, 0, len(c.waiting))
	for _, call := range c.waiting {
		out = append(out, call)
	}
	slices.SortFunc(out, func(a, b *Call) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// Wait returns the reply, ErrNoReply (with the read error, if any) when the
// worker's output ended without one, or ctx's error.
func (call *Call) Wait(ctx context.Context) (Reply, error) {
	select {
	case r, ok := <-call.ch:
		if !ok {
			if err := call.conn.Err(); err != nil {
				return Reply{}, fmt.Errorf("%s %v: %w (read error: %w)", call.Method, call.ID, ErrNoReply, err)
			}
			return Reply{}, fmt.Errorf("%s %v: %w", call.Method, call.ID, ErrNoReply)
		}
		return r, nil
	case <-ctx.Done():
		return Reply{}, fmt.Errorf("%s %v: no reply: %w", call.Method, call.ID, ctx.Err())
	}
}

// encodeRequest appends r as one line.
func encodeRequest(buf *bytes.Buffer, r Request) error {
	id, err := json.Marshal(r.ID)
	if err != nil {
		return fmt.Errorf("request id: %w", err)
	}
	method, _ := json.Marshal(r.Method)
	fmt.Fprintf(buf, `{"jsonrpc":"2.0","id":%s,"method":%s`, id, method)
	keys := make([]string, 0, len(r.Members))
	for k := range r.Members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := json.Marshal(r.Members[k])
		if err != nil {
			return fmt.Errorf("%s of %s: %w", k, r.Method, err)
		}
		fmt.Fprintf(buf, `,%s:%s`, strconv.Quote(k), v)
	}
	if r.Params != nil {
		params, ok := r.Params.(json.RawMessage)
		if !ok {
			if params, err = json.Marshal(r.Params); err != nil {
				return fmt.Errorf("params of %s: %w", r.Method, err)
			}
		}
		buf.WriteString(`,"params":`)
		buf.Write(params)
	}
	buf.WriteString("}\n")
	return nil
}

// idKey is an id's JSON text: the key replies are matched by (a number
// the worker echoes comes back as json.Number, with the same text).
func idKey(id any) string {
	if n, ok := id.(json.Number); ok {
		return n.String()
	}
	b, err := json.Marshal(id)
	if err != nil {
		return fmt.Sprint(id)
	}
	return string(b)
}
