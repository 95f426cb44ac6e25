package main

// The host side of the soak test (soak_test.go): one worker process, driven
// from many goroutines at once, whose every output line is checked as it
// arrives. Where the other end-to-end tests fail at the first surprise,
// this host records what it saw and carries on, so one run reports every
// broken invariant with the seed that reproduces it.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paperclipai/daytona-worker/protocol"
)

// soakHost is one running worker as the host sees it.
type soakHost struct {
	r        *soakRun
	p        *workerProc
	epoch    int
	stopping atomic.Bool // shutdown was sent: calls in flight may be cancelled

	writeMu sync.Mutex

	mu       sync.Mutex
	nextID   int
	pending  map[string]*soakCall // by the id's JSON text
	answered map[string]bool
	invs     map[string]*soakInv
	routes   map[string]*soakRoute // by host route id
	// Replies with id null: the worker's answer to a line that is not JSON
	// (-32700) or not a request (-32600). Each such line the host sent
	// counts one expected.
	nullReplies, nullExpected int
	// deaf: the host closed the worker's input, and with it stopped
	// waiting for replies (at the end of input the worker owes none).
	deaf     bool
	readDone chan struct{}
}

type soakCall struct {
	id      string // its JSON text
	method  string
	inv     string
	sent    time.Time
	ch      chan soakReply // gets the reply, or is closed when the worker's output ends without one
	onReply func(soakReply)
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

var errNoReply = errors.New("the worker's output ended without a reply")

func newSoakHost(r *soakRun, p *workerProc, epoch int) *soakHost {
	h := &soakHost{r: r, p: p, epoch: epoch, pending: map[string]*soakCall{}, answered: map[string]bool{},
		invs: map[string]*soakInv{}, routes: map[string]*soakRoute{}, readDone: make(chan struct{})}
	go h.read()
	return h
}

func (h *soakHost) fail(format string, args ...any) {
	h.r.fail("worker %d: "+format, append([]any{h.epoch}, args...)...)
}

func (h *soakHost) read() {
	defer close(h.readDone)
	br := bufio.NewReaderSize(h.p.stdout, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if line[len(line)-1] != '\n' {
				h.fail("stdout ended inside a line: %.300q", line)
			} else {
				h.handle(line[:len(line)-1])
			}
		}
		if err != nil {
			h.mu.Lock()
			for id, c := range h.pending {
				if !h.deaf {
					h.fail("no reply to %s %s (sent %s before the worker's output ended)", c.method, c.id, time.Since(c.sent).Round(time.Millisecond))
				}
				close(c.ch)
				delete(h.pending, id)
			}
			h.mu.Unlock()
			return
		}
	}
}

// soakMessage is any line the worker writes. json.RawMessage members tell
// a member that is null ("null") from one that is absent (nil).
type soakMessage struct {
	JSONRPC    string          `json:"jsonrpc"`
	ID         json.RawMessage `json:"id"`
	Method     string          `json:"method"`
	Params     json.RawMessage `json:"params"`
	Result     json.RawMessage `json:"result"`
	Error      json.RawMessage `json:"error"`
	Invocation string          `json:"paperclipInvocationId"`
}

func (h *soakHost) handle(line []byte) {
	if !json.Valid(line) {
		h.fail("a stdout line that is not JSON: %.300q", line)
		return
	}
	var m soakMessage
	if err := json.Unmarshal(line, &m); err != nil {
		h.fail("a stdout line that is no JSON-RPC object (%v): %.300q", err, line)
		return
	}
	if m.JSONRPC != "2.0" {
		h.fail("a line without jsonrpc 2.0: %.300q", line)
	}
	switch {
	case m.Method != "" && m.ID != nil:
		// A worker→host call; span.record is the only one the worker makes.
		if m.Method != protocol.CallSpanRecord {
			h.fail("a worker→host call of %q", m.Method)
		}
		go func() { _ = h.write(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":null}`+"\n", m.ID)) }()
	case m.Method != "":
		h.notification(m, line)
	case m.ID == nil:
		h.fail("a line with neither a method nor an id: %.300q", line)
	default:
		h.response(m, line)
	}
}

func (h *soakHost) response(m soakMessage, line []byte) {
	var compact bytes.Buffer
	_ = json.Compact(&compact, m.ID)
	key := compact.String()
	var rep soakReply
	rep.At = time.Now()
	if (m.Result != nil) == (m.Error != nil) {
		h.fail("a reply with both or neither of result and error: %.300q", line)
	}
	if m.Error != nil {
		rep.Error = &soakError{}
		if err := json.Unmarshal(m.Error, rep.Error); err != nil || rep.Error.Message == "" {
			h.fail("a malformed error object: %.300q", line)
		}
	} else {
		rep.Result = m.Result
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if key == "null" {
		h.nullReplies++
		if rep.Error == nil || (rep.Error.Code != protocol.CodeParseError && rep.Error.Code != protocol.CodeInvalidRequest) {
			h.fail("a reply with id null that is no parse or invalid-request error: %.300q", line)
		}
		return
	}
	c := h.pending[key]
	if c == nil {
		if h.answered[key] {
			h.fail("a second reply to id %s: %.300q", key, line)
		} else {
			h.fail("a reply to id %s, which the host never sent: %.300q", key, line)
		}
		return
	}
	delete(h.pending, key)
	h.answered[key] = true
	if inv := h.invs[c.inv]; inv != nil && c.method == protocol.MethodEnvironmentExecute {
		inv.ended = true
	}
	if c.onReply != nil {
		c.onReply(rep)
	}
	c.ch <- rep
}

func (h *soakHost) notification(m soakMessage, line []byte) {
	switch m.Method {
	case protocol.NotifyLog:
		var p struct {
			Level   string `json:"level"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || p.Level == "" {
			h.fail("a malformed log notification: %.300q", line)
		}
		if strings.HasPrefix(p.Message, "Uncaught exception") {
			h.fail("the worker reported a panic: %s", p.Message)
		}
	case protocol.NotifyExecuteLog:
		var p struct {
			Stream string `json:"stream"`
			Chunk  string `json:"chunk"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			h.fail("a malformed execute.log: %.300q", line)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		inv := h.invs[m.Invocation]
		switch {
		case inv == nil:
			h.fail("execute.log for invocation %q, which the host never started", m.Invocation)
			return
		case inv.ended:
			h.fail("execute.log for invocation %s after its execute was answered: %.200q", m.Invocation, p.Chunk)
		case p.Chunk == "":
			h.fail("an empty execute.log chunk for %s", m.Invocation)
		}
		inv.chunks++
		switch p.Stream {
		case "stdout":
			inv.stdout.WriteString(p.Chunk)
		case "stderr":
			inv.stderr.WriteString(p.Chunk)
		default:
			h.fail("execute.log with stream %q", p.Stream)
		}
	case protocol.NotifyLoginPtyOutput, protocol.NotifyLoginPtyExit, protocol.NotifyDuplexChannelData, protocol.NotifyDuplexChannelExit:
		h.terminalFrame(m, line)
	default:
		h.fail("an unknown notification: %.300q", line)
	}
}

func (h *soakHost) terminalFrame(m soakMessage, line []byte) {
	if m.Invocation != "" {
		h.fail("%s carries an invocation id", m.Method)
	}
	var p struct {
		HostRouteID     string          `json:"hostRouteId"`
		WorkerSessionID string          `json:"workerSessionId"`
		Chunk           *string         `json:"chunk"`
		ExitCode        json.RawMessage `json:"exitCode"`
		TransportClosed *bool           `json:"transportClosed"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		h.fail("a malformed %s: %.300q", m.Method, line)
		return
	}
	kind := "login"
	if strings.HasPrefix(m.Method, "duplexChannel.") {
		kind = "duplex"
	}
	isExit := strings.HasSuffix(m.Method, ".exit")
	h.mu.Lock()
	defer h.mu.Unlock()
	rt := h.routes[p.HostRouteID]
	switch {
	case rt == nil:
		h.fail("%s for route %q, which the host never opened", m.Method, p.HostRouteID)
		return
	case rt.kind != kind:
		h.fail("%s for %s route %s", m.Method, rt.kind, rt.id)
		return
	case rt.closeAcked:
		h.fail("%s for route %s after its close was acknowledged", m.Method, rt.id)
		return
	case rt.exited:
		h.fail("%s for route %s after its exit", m.Method, rt.id)
		return
	case p.WorkerSessionID == "":
		h.fail("%s without a workerSessionId", m.Method)
		return
	case rt.sid != "" && p.WorkerSessionID != rt.sid:
		h.fail("%s for route %s with session %s; the open bound %s", m.Method, rt.id, p.WorkerSessionID, rt.sid)
		return
	}
	if rt.frameSID == "" {
		rt.frameSID = p.WorkerSessionID
	} else if rt.frameSID != p.WorkerSessionID {
		h.fail("frames of route %s carry sessions %s and %s", rt.id, rt.frameSID, p.WorkerSessionID)
	}
	defer notifyChange(rt.changed)
	if isExit {
		rt.exited = true
		if string(p.ExitCode) != "null" && p.ExitCode != nil {
			n, err := strconv.Atoi(string(p.ExitCode))
			if err != nil {
				h.fail("%s with exit code %s", m.Method, p.ExitCode)
			}
			rt.exitCode = &n
		}
		if kind == "duplex" {
			if p.TransportClosed == nil {
				h.fail("duplexChannel.exit without transportClosed")
			} else {
				rt.transportClosed = *p.TransportClosed
			}
		}
		return
	}
	if p.Chunk == nil || *p.Chunk == "" {
		h.fail("%s without a chunk", m.Method)
		return
	}
	if kind == "login" {
		if utf16Len(*p.Chunk) > hostMaxLoginChunkUnits {
			h.fail("a loginPty.output chunk over the host's limit")
		}
		rt.data.WriteString(*p.Chunk)
		return
	}
	b, ok := protocol.DecodeChannelBytes(*p.Chunk)
	switch {
	case !ok || len(b) == 0:
		h.fail("a malformed duplexChannel.data chunk for %s", rt.id)
	case len(b) > hostMaxDuplexChunk:
		h.fail("a %d-byte duplexChannel.data chunk (the host ends the route)", len(b))
	default:
		rt.data.Write(b)
	}
}

// write writes one line (or several) to the worker in one write.
func (h *soakHost) write(line []byte) error {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	_, err := h.p.stdin.Write(line)
	return err
}

// call sends a request. Every fifth id is a number, the others strings.
func (h *soakHost) call(method string, params any, inv string, onReply func(soakReply)) (*soakCall, error) {
	h.mu.Lock()
	h.nextID++
	n := h.nextID
	h.mu.Unlock()
	id := strconv.Quote(fmt.Sprintf("soak-%d-%d", h.epoch, n))
	if n%5 == 0 {
		id = strconv.Itoa(n)
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method}
	if params != nil {
		msg["params"] = params
	}
	if inv != "" {
		msg["paperclipInvocation"] = map[string]any{"id": inv, "scope": map[string]any{"companyId": "c-1"}}
	}
	line, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	c := &soakCall{id: id, method: method, inv: inv, sent: time.Now(), ch: make(chan soakReply, 1), onReply: onReply}
	h.mu.Lock()
	h.pending[id] = c
	if inv != "" && h.invs[inv] == nil {
		h.invs[inv] = &soakInv{}
	}
	h.mu.Unlock()
	return c, h.write(append(line, '\n'))
}

// sendRaw writes a line that is not a request; replies says how many replies
// with id null it must get.
func (h *soakHost) sendRaw(line string, replies int) error {
	h.mu.Lock()
	h.nullExpected += replies
	h.mu.Unlock()
	return h.write([]byte(line + "\n"))
}

// wait returns the reply, errNoReply, or an error after d.
func (c *soakCall) wait(d time.Duration) (soakReply, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case rep, ok := <-c.ch:
		if !ok {
			return soakReply{}, errNoReply
		}
		return rep, nil
	case <-t.C:
		return soakReply{}, fmt.Errorf("no reply to %s %s within %s", c.method, c.id, d)
	}
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
		case <-h.readDone:
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
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.pending {
		out = append(out, fmt.Sprintf("%s %s (sent %s ago)", c.method, c.id, time.Since(c.sent).Round(time.Millisecond)))
	}
	return out
}
