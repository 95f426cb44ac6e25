package main

// The host side of the soak test (soak_test.go): one worker process, driven
// from many goroutines at once, whose every output line is checked as it
// arrives. Where the other end-to-end tests fail at the first surprise,
// this host records what it saw and carries on, so one run reports every
// broken invariant with the seed that reproduces it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paperclipai/daytona-worker/internal/workerhost"
	"github.com/paperclipai/daytona-worker/protocol"
)

// soakHost is one running worker as the host sees it.
type soakHost struct {
	r        *soakRun
	p        *workerhost.Process
	conn     *workerhost.Conn
	epoch    int
	stopping atomic.Bool // shutdown was sent: calls in flight may be cancelled

	mu       sync.Mutex
	nextID   int
	answered map[string]bool // by the id's JSON text
	invs     map[string]*soakInv
	routes   map[string]*soakRoute // by host route id
	// Replies with id null: the worker's answer to a line that is not JSON
	// (-32700) or not a request (-32600). Each such line the host sent
	// counts one expected.
	nullReplies, nullExpected int
	// deaf: the host closed the worker's input, and with it stopped
	// waiting for replies (at the end of input the worker owes none).
	deaf bool
}

type soakCall struct {
	id      string // its JSON text
	method  string
	inv     string
	sent    time.Time
	call    *workerhost.Call
	onReply func(soakReply)
	rep     soakReply // set on the reading goroutine as the reply is read
}

type soakReply struct {
	Result json.RawMessage
	Error  *soakError
	At     time.Time
}

type soakError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *soakError) String() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%d %s", e.Code, e.Message)
}

// soakInv is what execute.log delivered for one invocation.
type soakInv struct {
	stdout, stderr bytes.Buffer
	chunks         int
	ended          bool // its request was answered
}

// soakRoute is one login PTY or duplex channel as the host keeps it.
type soakRoute struct {
	kind            string // "login" or "duplex"
	id, sid         string
	frameSID        string // the session id the first frame carried
	data            bytes.Buffer
	exited          bool
	exitCode        *int
	transportClosed bool
	closeAcked      bool
	changed         chan struct{}
}

var errNoReply = workerhost.ErrNoReply

func newSoakHost(r *soakRun, p *workerhost.Process, epoch int) *soakHost {
	h := &soakHost{r: r, p: p, epoch: epoch, answered: map[string]bool{},
		invs: map[string]*soakInv{}, routes: map[string]*soakRoute{}}
	h.conn = workerhost.NewConn(p, p.Stdout(), workerhost.Options{
		Notify:    h.notification,
		Serve:     h.serve,
		Unmatched: h.unmatched,
	})
	return h
}

func (h *soakHost) fail(format string, args ...any) {
	h.r.fail("worker %d: "+format, append([]any{h.epoch}, args...)...)
}

// ended checks, once the worker's output has ended, that it ended cleanly
// and owed no reply.
func (h *soakHost) ended() {
	if err := h.conn.Err(); err != nil {
		h.fail("reading the worker's output: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deaf {
		return
	}
	for _, c := range h.conn.Pending() {
		h.fail("no reply to %s %v (sent %s before the worker's output ended)", c.Method, c.ID, time.Since(c.Sent).Round(time.Millisecond))
	}
}

// envelope checks what every line the worker writes must be.
func (h *soakHost) envelope(m workerhost.Message) {
	if m["jsonrpc"] != "2.0" {
		h.fail("a line without jsonrpc 2.0: %.300v", map[string]any(m))
	}
}

// serve answers the worker's own calls; span.record is the only one it
// makes.
func (h *soakHost) serve(m workerhost.Message) (any, *workerhost.Error) {
	h.envelope(m)
	if m.Method() != protocol.CallSpanRecord {
		h.fail("a worker→host call of %q", m.Method())
	}
	return nil, nil
}

// toReply checks a reply's members and gives it the form the soak reads.
func (h *soakHost) toReply(m workerhost.Message, at time.Time) soakReply {
	h.envelope(m)
	rep := soakReply{At: at}
	result, hasResult := m["result"]
	e, hasError := m["error"]
	if hasResult == hasError {
		h.fail("a reply with both or neither of result and error: %.300v", map[string]any(m))
	}
	if hasError {
		raw, _ := json.Marshal(e)
		rep.Error = &soakError{}
		if err := json.Unmarshal(raw, rep.Error); err != nil || rep.Error.Message == "" {
			h.fail("a malformed error object: %.300v", map[string]any(m))
		}
		return rep
	}
	rep.Result, _ = json.Marshal(result)
	return rep
}

// unmatched checks a reply no call waits for: a null id answers a line
// that was not a request.
func (h *soakHost) unmatched(m workerhost.Message) {
	rep := h.toReply(m, time.Now())
	id, _ := m.ID()
	key, _ := json.Marshal(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case id == nil:
		h.nullReplies++
		if rep.Error == nil || (rep.Error.Code != protocol.CodeParseError && rep.Error.Code != protocol.CodeInvalidRequest) {
			h.fail("a reply with id null that is no parse or invalid-request error: %.300v", map[string]any(m))
		}
	case h.answered[string(key)]:
		h.fail("a second reply to id %s: %.300v", key, map[string]any(m))
	default:
		h.fail("a reply to id %s, which the host never sent: %.300v", key, map[string]any(m))
	}
}

// response records the reply to c (on the reading goroutine).
func (h *soakHost) response(c *soakCall, r workerhost.Reply) {
	rep := h.toReply(r.Msg, r.At)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answered[c.id] = true
	c.rep = rep
	if inv := h.invs[c.inv]; inv != nil && c.method == protocol.MethodEnvironmentExecute {
		inv.ended = true
	}
	if c.onReply != nil {
		c.onReply(rep)
	}
}

func (h *soakHost) notification(m workerhost.Message) {
	h.envelope(m)
	params := m.Params()
	switch m.Method() {
	case protocol.NotifyLog:
		level, _ := params["level"].(string)
		message, _ := params["message"].(string)
		if level == "" {
			h.fail("a malformed log notification: %.300v", map[string]any(m))
		}
		if strings.HasPrefix(message, "Uncaught exception") {
			h.fail("the worker reported a panic: %s", message)
		}
	case protocol.NotifyExecuteLog:
		stream, _ := params["stream"].(string)
		chunk, ok := params["chunk"].(string)
		if !ok {
			h.fail("a malformed execute.log: %.300v", map[string]any(m))
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		inv := h.invs[m.Invocation()]
		switch {
		case inv == nil:
			h.fail("execute.log for invocation %q, which the host never started", m.Invocation())
			return
		case inv.ended:
			h.fail("execute.log for invocation %s after its execute was answered: %.200q", m.Invocation(), chunk)
		case chunk == "":
			h.fail("an empty execute.log chunk for %s", m.Invocation())
		}
		inv.chunks++
		switch stream {
		case "stdout":
			inv.stdout.WriteString(chunk)
		case "stderr":
			inv.stderr.WriteString(chunk)
		default:
			h.fail("execute.log with stream %q", stream)
		}
	case protocol.NotifyLoginPtyOutput, protocol.NotifyLoginPtyExit, protocol.NotifyDuplexChannelData, protocol.NotifyDuplexChannelExit:
		h.terminalFrame(m)
	default:
		h.fail("an unknown notification: %.300v", map[string]any(m))
	}
}

func (h *soakHost) terminalFrame(m workerhost.Message) {
	method := m.Method()
	if _, has := m["paperclipInvocationId"]; has {
		h.fail("%s carries an invocation id", method)
	}
	params := m.Params()
	if params == nil {
		h.fail("a malformed %s: %.300v", method, map[string]any(m))
		return
	}
	routeID, sid := paramString(params, "hostRouteId"), paramString(params, "workerSessionId")
	kind := "login"
	if strings.HasPrefix(method, "duplexChannel.") {
		kind = "duplex"
	}
	isExit := strings.HasSuffix(method, ".exit")
	h.mu.Lock()
	defer h.mu.Unlock()
	rt := h.routes[routeID]
	switch {
	case rt == nil:
		h.fail("%s for route %q, which the host never opened", method, routeID)
		return
	case rt.kind != kind:
		h.fail("%s for %s route %s", method, rt.kind, rt.id)
		return
	case rt.closeAcked:
		h.fail("%s for route %s after its close was acknowledged", method, rt.id)
		return
	case rt.exited:
		h.fail("%s for route %s after its exit", method, rt.id)
		return
	case sid == "":
		h.fail("%s without a workerSessionId", method)
		return
	case rt.sid != "" && sid != rt.sid:
		h.fail("%s for route %s with session %s; the open bound %s", method, rt.id, sid, rt.sid)
		return
	}
	if rt.frameSID == "" {
		rt.frameSID = sid
	} else if rt.frameSID != sid {
		h.fail("frames of route %s carry sessions %s and %s", rt.id, rt.frameSID, sid)
	}
	defer notifyChange(rt.changed)
	if isExit {
		rt.exited = true
		if code, present := params["exitCode"]; present && code != nil {
			if rt.exitCode = paramExit(params); rt.exitCode == nil {
				h.fail("%s with exit code %v", method, code)
			}
		}
		if kind == "duplex" {
			if tc, ok := params["transportClosed"].(bool); !ok {
				h.fail("duplexChannel.exit without transportClosed")
			} else {
				rt.transportClosed = tc
			}
		}
		return
	}
	chunk := paramString(params, "chunk")
	if chunk == "" {
		h.fail("%s without a chunk", method)
		return
	}
	if kind == "login" {
		if utf16Len(chunk) > hostMaxLoginChunkUnits {
			h.fail("a loginPty.output chunk over the host's limit")
		}
		rt.data.WriteString(chunk)
		return
	}
	b, ok := protocol.DecodeChannelBytes(chunk)
	switch {
	case !ok || len(b) == 0:
		h.fail("a malformed duplexChannel.data chunk for %s", rt.id)
	case len(b) > hostMaxDuplexChunk:
		h.fail("a %d-byte duplexChannel.data chunk (the host ends the route)", len(b))
	default:
		rt.data.Write(b)
	}
}

// call sends a request. Every fifth id is a number, the others strings.
func (h *soakHost) call(method string, params any, inv string, onReply func(soakReply)) (*soakCall, error) {
	c := &soakCall{method: method, inv: inv, sent: time.Now(), onReply: onReply}
	req := workerhost.Request{Method: method, Params: params, OnReply: func(r workerhost.Reply) { h.response(c, r) }}
	if inv != "" {
		req.Members = map[string]any{"paperclipInvocation": map[string]any{"id": inv, "scope": map[string]any{"companyId": "c-1"}}}
	}
	h.mu.Lock()
	h.nextID++
	req.ID = fmt.Sprintf("soak-%d-%d", h.epoch, h.nextID)
	if h.nextID%5 == 0 {
		req.ID = h.nextID
	}
	id, _ := json.Marshal(req.ID)
	c.id = string(id)
	if inv != "" && h.invs[inv] == nil {
		h.invs[inv] = &soakInv{}
	}
	h.mu.Unlock()
	calls, err := h.conn.Send(req)
	if err != nil {
		return nil, err
	}
	c.call = calls[0]
	return c, nil
}

// sendRaw writes a line that is not a request; replies says how many replies
// with id null it must get.
func (h *soakHost) sendRaw(line string, replies int) error {
	h.mu.Lock()
	h.nullExpected += replies
	h.mu.Unlock()
	return h.conn.Write([]byte(line + "\n"))
}

// wait returns the reply, errNoReply, or an error after d.
func (c *soakCall) wait(d time.Duration) (soakReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if _, err := c.call.Wait(ctx); err != nil {
		return soakReply{}, err
	}
	return c.rep, nil // set before the reply was delivered
}

// streamed returns what execute.log delivered for inv.
func (h *soakHost) streamed(inv string) (stdout, stderr string, chunks int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.invs[inv]
	if i == nil {
		return "", "", 0
	}
	return i.stdout.String(), i.stderr.String(), i.chunks
}

// newRoute registers a terminal route before its open is sent.
func (h *soakHost) newRoute(kind, id string) *soakRoute {
	rt := &soakRoute{kind: kind, id: id, changed: make(chan struct{}, 1)}
	h.mu.Lock()
	h.routes[id] = rt
	h.mu.Unlock()
	return rt
}

// bind records the open's reply (under h.mu, as the reply is read).
func (h *soakHost) bind(rt *soakRoute, rep soakReply) {
	if rep.Error != nil {
		return
	}
	var m struct {
		HostRouteID     string `json:"hostRouteId"`
		WorkerSessionID string `json:"workerSessionId"`
	}
	if err := json.Unmarshal(rep.Result, &m); err != nil || m.WorkerSessionID == "" {
		h.fail("an open of %s route %s answered %s", rt.kind, rt.id, rep.Result)
		return
	}
	if rt.kind == "duplex" && m.HostRouteID != rt.id {
		h.fail("duplexChannelOpen of %s answered route %q", rt.id, m.HostRouteID)
	}
	if rt.frameSID != "" && rt.frameSID != m.WorkerSessionID {
		h.fail("route %s: frames came for session %s, the open bound %s", rt.id, rt.frameSID, m.WorkerSessionID)
	}
	for _, other := range h.routes {
		if other != rt && other.sid == m.WorkerSessionID {
			h.fail("session %s bound to routes %s and %s", m.WorkerSessionID, other.id, rt.id)
		}
	}
	rt.sid = m.WorkerSessionID
}

// ackClose records a close's acknowledgement (under h.mu).
func (h *soakHost) ackClose(rt *soakRoute, rep soakReply) {
	if rep.Error != nil {
		h.fail("the close of %s route %s failed: %s", rt.kind, rt.id, rep.Error)
		return
	}
	var m struct {
		HostRouteID     string `json:"hostRouteId"`
		WorkerSessionID string `json:"workerSessionId"`
	}
	if err := json.Unmarshal(rep.Result, &m); err != nil || m.HostRouteID != rt.id {
		h.fail("the close of route %s acknowledged %s", rt.id, rep.Result)
	}
	if rt.kind == "duplex" && rt.sid != "" && m.WorkerSessionID != rt.sid {
		h.fail("the close of duplex route %s acknowledged session %q, bound %s", rt.id, m.WorkerSessionID, rt.sid)
	}
	rt.closeAcked = true
}

// await waits until cond (called under h.mu) holds, the route's worker
// exits, or d passes; it reports whether cond held.
func (h *soakHost) await(rt *soakRoute, d time.Duration, cond func() bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-rt.changed:
		case <-h.conn.Done():
			h.mu.Lock()
			defer h.mu.Unlock()
			return cond()
		case <-t.C:
			return false
		}
	}
}

func (h *soakHost) exited(rt *soakRoute) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return rt.exited
}

// routeData is a copy of what the route received so far.
func (h *soakHost) routeData(rt *soakRoute) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Clone(rt.data.Bytes())
}

// unanswered lists the requests still waiting for a reply.
func (h *soakHost) unanswered() []string {
	var out []string
	for _, c := range h.conn.Pending() {
		out = append(out, fmt.Sprintf("%s %v (sent %s ago)", c.Method, c.ID, time.Since(c.Sent).Round(time.Millisecond)))
	}
	return out
}
