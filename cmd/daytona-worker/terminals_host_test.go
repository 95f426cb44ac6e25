package main

// The host side of login PTYs and duplex channels, kept as the Paperclip
// host's worker manager keeps them (plugin-worker-manager.js): routes are
// registered before the open, bound from its reply, frames routed by route
// id (login) or exact pair (duplex), and closes acknowledged. Wherever the
// real host would retire the worker (a duplex frame for a pair it does not
// know, a close acknowledged wrongly, a duplicate pair), the test host
// records a violation, and checkClean fails the test.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/pty"
)

// Host limits (plugin-worker-manager.js).
const (
	hostMaxDuplexChunk        = 262_144
	hostMaxDuplexPendingBytes = 393_216
	hostMaxDuplexPendingReqs  = 256
	hostMaxLoginChunkUnits    = 1_000_000
)

// terminalRoutes is guarded by host.mu.
type terminalRoutes struct {
	logins     map[string]*loginRoute  // by host route id
	opening    map[string]*duplexRoute // by host route id, until bound
	live       map[string]*duplexRoute // by pair
	tombstones map[string]bool         // closed pairs
	nextRoute  int
	violations []string // the host would retire the worker
	anomalies  []string // the host would drop or end a route: never expected from this worker
	preBind    int      // frames that arrived before their route bound
	dropped    int      // frames for closed routes, dropped silently
}

func newTerminalRoutes() *terminalRoutes {
	return &terminalRoutes{logins: map[string]*loginRoute{}, opening: map[string]*duplexRoute{},
		live: map[string]*duplexRoute{}, tombstones: map[string]bool{}}
}

func pairKey(id, sid string) string { return id + "\x00" + sid }

func paramString(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func paramExit(m map[string]any) *int {
	n, ok := m["exitCode"].(interface{ Int64() (int64, error) })
	if !ok {
		return nil
	}
	v, err := n.Int64()
	if err != nil {
		return nil
	}
	c := int(v)
	return &c
}

// notify routes one worker notification, under host.mu.
func (t *terminalRoutes) notify(method string, params map[string]any) {
	id, sid := paramString(params, "hostRouteId"), paramString(params, "workerSessionId")
	switch method {
	case "loginPty.output", "loginPty.exit":
		r := t.logins[id]
		switch {
		case r == nil:
			t.dropped++
		case r.state == "opening":
			t.preBind++
			r.held = append(r.held, heldFrame{method, params})
		case r.state == "open":
			t.applyLogin(r, method, params)
		default:
			t.dropped++
		}
	case "duplexChannel.data", "duplexChannel.exit":
		if id == "" || sid == "" {
			t.violations = append(t.violations, fmt.Sprintf("%s with an empty id: %v", method, params))
			return
		}
		if r := t.live[pairKey(id, sid)]; r != nil {
			t.applyDuplex(r, method, params)
			return
		}
		if t.tombstones[pairKey(id, sid)] {
			t.dropped++
			return
		}
		if r := t.opening[id]; r != nil {
			t.preBind++
			r.held = append(r.held, heldFrame{method, params})
			return
		}
		t.violations = append(t.violations, fmt.Sprintf("%s for a pair the host does not know: %s / %s", method, id, sid))
	}
}

type heldFrame struct {
	method string
	params map[string]any
}

func (t *terminalRoutes) applyLogin(r *loginRoute, method string, params map[string]any) {
	if sid := paramString(params, "workerSessionId"); sid != r.sid {
		t.anomalies = append(t.anomalies, fmt.Sprintf("%s for route %s with session %q, bound %q", method, r.id, sid, r.sid))
		return
	}
	if method == "loginPty.exit" {
		r.exited, r.exitCode, r.state = true, paramExit(params), "exited"
		notifyChange(r.changed)
		return
	}
	chunk, ok := params["chunk"].(string)
	if !ok || chunk == "" || utf16Len(chunk) > hostMaxLoginChunkUnits {
		t.anomalies = append(t.anomalies, fmt.Sprintf("loginPty.output chunk the host drops (%d bytes)", len(chunk)))
		return
	}
	r.text.WriteString(chunk)
	r.chunks++
	notifyChange(r.changed)
}

func (t *terminalRoutes) applyDuplex(r *duplexRoute, method string, params map[string]any) {
	if method == "duplexChannel.exit" {
		if r.exited {
			t.anomalies = append(t.anomalies, "a second duplexChannel.exit for "+r.id)
		}
		r.exited, r.exitCode = true, paramExit(params)
		tc, isBool := params["transportClosed"].(bool)
		if !isBool {
			t.anomalies = append(t.anomalies, "duplexChannel.exit without a boolean transportClosed")
		}
		r.transportClosed = tc
		notifyChange(r.changed)
		return
	}
	chunk, ok := protocol.DecodeChannelBytes(paramString(params, "chunk"))
	switch {
	case !ok || len(chunk) == 0:
		t.anomalies = append(t.anomalies, "a malformed or empty duplexChannel.data chunk for "+r.id)
		return
	case len(chunk) > hostMaxDuplexChunk:
		t.anomalies = append(t.anomalies, fmt.Sprintf("a %d-byte duplexChannel.data chunk for %s (the host ends the route)", len(chunk), r.id))
		return
	case r.exited:
		t.anomalies = append(t.anomalies, "duplexChannel.data after the exit of "+r.id)
	}
	r.data.Write(chunk)
	r.chunks++
	notifyChange(r.changed)
}

func notifyChange(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// loginRoute is one login PTY as the host sees it.
type loginRoute struct {
	h        *host
	id, sid  string
	state    string // opening, open, exited, closed
	held     []heldFrame
	text     strings.Builder
	chunks   int
	exited   bool
	exitCode *int
	changed  chan struct{}
}

// duplexRoute is one duplex channel as the host sees it.
type duplexRoute struct {
	h               *host
	id, sid         string
	state           string // opening, open, closed
	held            []heldFrame
	data            bytes.Buffer
	chunks          int
	exited          bool
	exitCode        *int
	transportClosed bool
	changed         chan struct{}

	pendingBytes, pendingReqs int
	writeErrors               []map[string]any
	room                      chan struct{}
}

func loginParams(l lease, routeID, key, home string) map[string]any {
	return map[string]any{"hostRouteId": routeID, "driverKey": "daytona", "companyId": "c-1", "environmentId": "env-1",
		"providerLeaseId": l.id, "loginCommandKey": key, "sessionHome": home}
}

// openLogin opens a login PTY the way the host does; on failure the route
// is closed as the host closes it.
func (h *host) openLogin(l lease, key, home string) (*loginRoute, reply) {
	h.t.Helper()
	r := &loginRoute{h: h, id: uuid.NewString(), state: "opening", changed: make(chan struct{}, 1)}
	h.mu.Lock()
	h.terms.logins[r.id] = r
	h.mu.Unlock()
	rep := h.send(request{method: "loginPtyOpen", params: loginParams(l, r.id, key, home), invocation: newInvocation(),
		onReply: func(rep reply) { h.bindLogin(r, rep) }})[0].wait()
	if rep.Error != nil {
		h.closeLogin(r)
	}
	return r, rep
}

// bindLogin binds a login route from its open reply, under h.mu.
func (h *host) bindLogin(r *loginRoute, rep reply) {
	sid := ""
	if m, ok := rep.Result.(map[string]any); ok {
		sid = paramString(m, "workerSessionId")
	}
	if rep.Error != nil || sid == "" || r.state != "opening" {
		return // the opener closes the route
	}
	for _, other := range h.terms.logins {
		if other != r && other.sid == sid {
			h.terms.anomalies = append(h.terms.anomalies, "a login session id bound twice: "+sid)
		}
	}
	r.sid, r.state = sid, "open"
	held := r.held
	r.held = nil
	for _, f := range held {
		if r.state == "open" {
			h.terms.applyLogin(r, f.method, f.params)
		}
	}
}

// closeLogin terminalizes a login route: forget it, then close it and
// check the acknowledgement, as the host does.
func (h *host) closeLogin(r *loginRoute) {
	h.t.Helper()
	h.mu.Lock()
	r.state = "closed"
	delete(h.terms.logins, r.id)
	h.mu.Unlock()
	rep := h.call("loginPtyClose", map[string]any{"hostRouteId": r.id}, "").waitFor(10 * time.Second)
	m, _ := rep.Result.(map[string]any)
	if rep.Error != nil || paramString(m, "hostRouteId") != r.id {
		h.mu.Lock()
		h.terms.violations = append(h.terms.violations, fmt.Sprintf("loginPtyClose of %s acknowledged with %v / %v", r.id, rep.Result, rep.Error))
		h.mu.Unlock()
	}
}

func (r *loginRoute) input(data string) reply {
	r.h.t.Helper()
	return r.h.call("loginPtyInput", map[string]any{"workerSessionId": r.sid, "data": data}, "").wait()
}

func (r *loginRoute) stop() reply {
	r.h.t.Helper()
	return r.h.call("loginPtyStop", map[string]any{"workerSessionId": r.sid}, "").wait()
}

// await waits until cond (called under h.mu) holds.
func (h *host) await(changed chan struct{}, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-h.conn.Done():
			h.mu.Lock()
			defer h.mu.Unlock()
			if !cond() {
				h.t.Fatalf("the worker's output ended before %s", what)
			}
			return
		case <-deadline.C:
			h.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *loginRoute) waitText(s string) {
	r.h.t.Helper()
	r.h.await(r.changed, fmt.Sprintf("%q on login route %s", s, r.id), func() bool { return strings.Contains(r.text.String(), s) })
}

func (r *loginRoute) waitExit() *int {
	r.h.t.Helper()
	r.h.await(r.changed, "the exit of login route "+r.id, func() bool { return r.exited })
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.exitCode
}

func (r *loginRoute) output() string {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.text.String()
}

func duplexParams(l lease, routeID string, argv []string) map[string]any {
	return map[string]any{"hostRouteId": routeID, "driverKey": "daytona", "companyId": "c-1", "environmentId": "env-1",
		"providerLeaseId": l.id, "command": argv}
}

// newDuplexRoute registers a route for an open about to be sent.
func (h *host) newDuplexRoute() *duplexRoute {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.terms.nextRoute++
	r := &duplexRoute{h: h, id: fmt.Sprintf("duplex-route-%d", h.terms.nextRoute), state: "opening",
		changed: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	h.terms.opening[r.id] = r
	return r
}

// openDuplexRequest is the open of r, binding r from its reply.
func (h *host) openDuplexRequest(r *duplexRoute, l lease, argv []string) request {
	return request{method: "duplexChannelOpen", params: duplexParams(l, r.id, argv), invocation: newInvocation(),
		onReply: func(rep reply) { h.bindDuplex(r, rep) }}
}

// openDuplex opens a duplex channel the way the host does; on failure the
// route is closed as the host closes it.
func (h *host) openDuplex(l lease, argv ...string) (*duplexRoute, reply) {
	h.t.Helper()
	r := h.newDuplexRoute()
	rep := h.send(h.openDuplexRequest(r, l, argv))[0].wait()
	h.afterDuplexOpen(r, rep)
	return r, rep
}

func (h *host) afterDuplexOpen(r *duplexRoute, rep reply) {
	h.t.Helper()
	if rep.Error != nil {
		h.closeDuplex(r)
		return
	}
	uid := strings.TrimPrefix(r.sid, "duplex-")
	h.t.Cleanup(func() { _ = os.Remove(pty.DiagnosticsPath(uid)) })
}

// bindDuplex binds a duplex route from its open reply, under h.mu.
func (h *host) bindDuplex(r *duplexRoute, rep reply) {
	m, _ := rep.Result.(map[string]any)
	sid := paramString(m, "workerSessionId")
	if rep.Error != nil || r.state != "opening" {
		return
	}
	if sid == "" || paramString(m, "hostRouteId") != r.id {
		h.terms.anomalies = append(h.terms.anomalies, fmt.Sprintf("duplexChannelOpen reply the host cannot bind: %v", rep.Result))
		return
	}
	key := pairKey(r.id, sid)
	if h.terms.live[key] != nil || h.terms.tombstones[key] {
		h.terms.violations = append(h.terms.violations, "a duplicate bound pair "+r.id+" / "+sid)
		return
	}
	delete(h.terms.opening, r.id)
	h.terms.live[key] = r
	r.sid, r.state = sid, "open"
	held := r.held
	r.held = nil
	for _, f := range held {
		if f.method == "duplexChannel.data" {
			h.terms.applyDuplex(r, f.method, f.params)
		}
	}
	for _, f := range held {
		if f.method == "duplexChannel.exit" {
			h.terms.applyDuplex(r, f.method, f.params)
		}
	}
}

// closeDuplex terminalizes a duplex route as the host does: the pair is
// tombstoned first, then closed, and the acknowledgement must echo the
// route and, for a bound route, the bound session.
func (h *host) closeDuplex(r *duplexRoute) {
	h.t.Helper()
	h.sendCloseDuplex(r).check()
}

type closeCheck struct {
	h     *host
	r     *duplexRoute
	bound string
	p     *pending
}

// sendCloseDuplex is closeDuplex without waiting for the acknowledgement.
func (h *host) sendCloseDuplex(r *duplexRoute) closeCheck {
	h.t.Helper()
	return h.closeDuplexRequest(r, func(req request) *pending { return h.send(req)[0] })
}

func (h *host) closeDuplexRequest(r *duplexRoute, send func(request) *pending) closeCheck {
	h.mu.Lock()
	bound := ""
	if r.state == "open" {
		bound = r.sid
		delete(h.terms.live, pairKey(r.id, r.sid))
		h.terms.tombstones[pairKey(r.id, r.sid)] = true
	}
	delete(h.terms.opening, r.id)
	r.state = "closed"
	h.mu.Unlock()
	return closeCheck{h: h, r: r, bound: bound, p: send(request{method: "duplexChannelClose", params: map[string]any{"hostRouteId": r.id}})}
}

func (c closeCheck) check() {
	c.h.t.Helper()
	rep := c.p.waitFor(10 * time.Second)
	m, _ := rep.Result.(map[string]any)
	if sid := paramString(m, "workerSessionId"); strings.HasPrefix(sid, "duplex-") {
		// A channel that failed to open may still have left its diagnostics.
		c.h.t.Cleanup(func() { _ = os.Remove(pty.DiagnosticsPath(strings.TrimPrefix(sid, "duplex-"))) })
	}
	ok := rep.Error == nil && paramString(m, "hostRouteId") == c.r.id && (c.bound == "" || paramString(m, "workerSessionId") == c.bound)
	if !ok {
		c.h.mu.Lock()
		c.h.terms.violations = append(c.h.terms.violations, fmt.Sprintf("duplexChannelClose of %s (bound %q) acknowledged with %v / %v", c.r.id, c.bound, rep.Result, rep.Error))
		c.h.mu.Unlock()
	}
}

// write sends one duplexChannelWrite, waiting first for room under the
// host's pending-write bounds (the host would end a route past them).
func (r *duplexRoute) write(data []byte) {
	r.h.t.Helper()
	if len(data) > hostMaxDuplexChunk {
		r.h.t.Fatalf("a %d-byte write: the host never sends one", len(data))
	}
	r.h.await(r.room, "room to write", func() bool {
		return r.pendingReqs < hostMaxDuplexPendingReqs && r.pendingBytes+len(data) <= hostMaxDuplexPendingBytes
	})
	r.h.mu.Lock()
	r.pendingReqs++
	r.pendingBytes += len(data)
	r.h.mu.Unlock()
	n := len(data)
	params := fmt.Appendf(nil, `{"hostRouteId":%q,"workerSessionId":%q,"data":"%s"}`, r.id, r.sid, base64.StdEncoding.EncodeToString(data))
	r.h.send(request{method: "duplexChannelWrite", params: rawParams(params),
		onReply: func(rep reply) {
			r.pendingReqs--
			r.pendingBytes -= n
			if rep.Error != nil {
				r.writeErrors = append(r.writeErrors, rep.Error)
			}
			notifyChange(r.room)
		}})
}

func (r *duplexRoute) waitBytes(n int) {
	r.h.t.Helper()
	r.h.await(r.changed, fmt.Sprintf("%d bytes on %s", n, r.id), func() bool { return r.data.Len() >= n || r.exited })
}

func (r *duplexRoute) waitExit() (code *int, transportClosed bool) {
	r.h.t.Helper()
	r.h.await(r.changed, "the exit of "+r.id, func() bool { return r.exited })
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return r.exitCode, r.transportClosed
}

func (r *duplexRoute) bytes() []byte {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	return bytes.Clone(r.data.Bytes())
}

// checkTerminals fails the test on anything the host would not have taken.
func (h *host) checkTerminals(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.terms.violations) > 0 {
		t.Errorf("the host would retire the worker: %q", h.terms.violations)
	}
	if len(h.terms.anomalies) > 0 {
		t.Errorf("frames the host would drop or end a route for: %q", h.terms.anomalies)
	}
}
