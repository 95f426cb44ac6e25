package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Fault describes a failure to inject into matching requests. A request
// matches when every non-empty selector matches; the first matching fault (in
// the order added) applies. Latency runs first, then Hang, Status or the
// behaviours the real handler takes on (the WebSocket drop, the half-open log
// stream, the delayed exit code); a fault with only Latency delays the real
// handler.
type Fault struct {
	Method    string // HTTP method; "" = any
	Path      string // regexp on the URL path, e.g. `^/api/sandbox$` or `/process/execute$`; "" = any
	SandboxID string // only requests about this sandbox (toolbox or /api/sandbox/{idOrName}); "" = any
	Times     int    // how many requests it hits; 0 = unlimited

	Latency    time.Duration // delay before answering (or before the real handler)
	Status     int           // answer with this status instead of the real handler
	Body       string        // body for Status; "" = a realistic JSON error for the route
	EmptyBody  bool          // answer Status with no body at all (as some proxies do), whatever Body says
	RetryAfter string        // sets Retry-After and Retry-After-{throttler} (e.g. Retry-After-sandbox-create)
	Hang       bool          // never answer: block until the client gives up or the server closes

	// DropWebSocketAfterBytes, on WebSocket routes (session logs, PTY), cuts the
	// TCP connection without a close frame after that many payload bytes.
	DropWebSocketAfterBytes int

	// Command, on POST …/process/execute, selects only requests whose
	// command contains this text ("" = any request).
	Command string
	// Reply answers a matching execute with this outcome instead of running
	// the command (a 200, as the daemon answers a command that ran).
	Reply *ExecReply
	// Gate holds a matching request until the channel is closed, then lets
	// it through to the real handler (Go only; the admin API has no gates).
	Gate <-chan struct{}

	// HalfOpenAfterEnd, on a followed session-command log (WebSocket or HTTP),
	// sends the whole output and then goes silent once the command has ended:
	// no close frame, no end of stream, the connection left open until the
	// client gives up (a half-open connection whose close never arrives).
	HalfOpenAfterEnd bool

	// ExitCodeDelay, on a session exec (POST …/process/session/{id}/exec),
	// makes the command it starts publish its exit code that long after the
	// command ended: its followed log closes as soon as the output is
	// complete, while GET …/command/{id} still answers exitCode null (as the
	// daemon does for a moment after the log closes).
	ExitCodeDelay time.Duration

	// Reset, on a plain HTTP route (not a WebSocket), lets the real handler
	// run and answer, but cuts the TCP connection with a reset (RST) once
	// ResetAfterBytes bytes of its response body went out; with 0 the reset
	// comes before the status line. What the handler did (a command
	// started, a file written) stays done: the client only loses the
	// answer, as behind a proxy or load balancer that drops a connection.
	// A body shorter than ResetAfterBytes goes out whole.
	Reset           bool
	ResetAfterBytes int

	// SlowBody, on a plain HTTP route, sends the real handler's response
	// body in pieces of SlowBodyChunk bytes (0: 512), SlowBody apart, as a
	// congested link delivers it.
	SlowBody      time.Duration
	SlowBodyChunk int
}

// FaultHit is one request a fault applied to.
type FaultHit struct {
	FaultID   int
	Method    string
	Path      string
	SandboxID string // the sandbox the request was about; "" when none
	At        time.Time
}

// ExecReply is the outcome an execute fault answers with.
type ExecReply struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

type faultEntry struct {
	id   int
	f    Fault
	re   *regexp.Regexp
	left int // remaining hits when f.Times > 0
}

// appliedFaultKey carries the fault a request matched to the real handler.
type appliedFaultKey struct{}

// appliedFault is the fault the request matched, if the real handler has a
// part to play in it.
func appliedFault(r *http.Request) *Fault {
	f, _ := r.Context().Value(appliedFaultKey{}).(*Fault)
	return f
}

// AddFault installs f and returns a function that removes it. Path must be a
// valid regexp (AddFault panics otherwise: it is a test's programming error;
// the admin API reports it as 400 instead).
func (s *Server) AddFault(f Fault) (remove func()) {
	id, err := s.addFault(f)
	if err != nil {
		panic(err)
	}
	return func() { s.RemoveFault(id) }
}

func (s *Server) addFault(f Fault) (int, error) {
	e := &faultEntry{f: f, left: f.Times}
	if f.Path != "" {
		re, err := regexp.Compile(f.Path)
		if err != nil {
			return 0, fmt.Errorf("emulator: fault path %q: %w", f.Path, err)
		}
		e.re = re
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFaultID++
	e.id = s.nextFaultID
	s.faults = append(s.faults, e)
	return e.id, nil
}

// FaultHits lists every request a fault applied to, in order, since the
// server started (or ResetFaultHits), so a test can tell which of its calls
// met a fault.
func (s *Server) FaultHits() []FaultHit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.faultHits)
}

// ResetFaultHits forgets the hits FaultHits lists.
func (s *Server) ResetFaultHits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultHits = nil
}

// RemoveFault removes the fault with the given ID (see Faults).
func (s *Server) RemoveFault(id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.faults {
		if e.id == id {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return
		}
	}
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// FaultInfo is an installed fault with its ID and remaining hits.
type FaultInfo struct {
	ID    int
	Fault Fault
	Left  int // remaining hits; 0 with Fault.Times == 0 means unlimited
}

// Faults lists the installed faults in match order.
func (s *Server) Faults() []FaultInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]FaultInfo, 0, len(s.faults))
	for _, e := range s.faults {
		out = append(out, FaultInfo{ID: e.id, Fault: e.f, Left: e.left})
	}
	return out
}

// sandboxIDForPathLocked finds the sandbox a request is about.
func (s *Server) sandboxIDForPathLocked(p string) string {
	if rest, ok := strings.CutPrefix(p, "/toolbox/"); ok {
		id, _, _ := strings.Cut(rest, "/")
		return id
	}
	if rest, ok := strings.CutPrefix(p, "/api/sandbox/"); ok {
		key, _, _ := strings.Cut(rest, "/")
		if sb := s.findLocked(key); sb != nil {
			return sb.id
		}
		return key
	}
	return ""
}

// applyFaults runs the first matching fault. handled means the response was
// written (or abandoned); otherwise the returned request goes to the handler.
func (s *Server) applyFaults(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	s.mu.Lock()
	if len(s.faults) == 0 {
		s.mu.Unlock()
		return r, false
	}
	command, hasCommand := "", false
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/process/execute") && s.commandFaultsLocked() {
		s.mu.Unlock()
		command, hasCommand = peekCommand(r)
		s.mu.Lock()
	}
	sbID := s.sandboxIDForPathLocked(r.URL.Path)
	var f *Fault
	var hitID int
	for i, e := range s.faults {
		if (e.f.Method != "" && !strings.EqualFold(e.f.Method, r.Method)) ||
			(e.re != nil && !e.re.MatchString(r.URL.Path)) ||
			(e.f.SandboxID != "" && e.f.SandboxID != sbID) ||
			(e.f.Command != "" && (!hasCommand || !strings.Contains(command, e.f.Command))) {
			continue
		}
		copied := e.f
		f = &copied
		hitID = e.id
		if e.f.Times > 0 {
			e.left--
			if e.left <= 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		break
	}
	if f != nil {
		s.faultHits = append(s.faultHits, FaultHit{FaultID: hitID, Method: r.Method, Path: r.URL.Path, SandboxID: sbID, At: time.Now()})
	}
	s.mu.Unlock()
	if f == nil {
		return r, false
	}
	s.log.Info().Str("method", r.Method).Str("path", r.URL.Path).Int("status", f.Status).
		Dur("latency", f.Latency).Bool("hang", f.Hang).Int("dropAfter", f.DropWebSocketAfterBytes).
		Bool("halfOpenAfterEnd", f.HalfOpenAfterEnd).Dur("exitCodeDelay", f.ExitCodeDelay).Msg("injecting fault")

	if f.Latency > 0 || f.Hang || f.Gate != nil {
		release, ok := s.hold()
		if !ok {
			return r, true
		}
		defer release()
	}
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return r, true
		case <-s.ctx.Done():
			t.Stop()
			return r, true
		}
	}
	if f.Gate != nil {
		select {
		case <-f.Gate:
		case <-r.Context().Done():
			return r, true
		case <-s.ctx.Done():
			return r, true
		}
	}
	if f.Hang {
		select {
		case <-r.Context().Done():
		case <-s.ctx.Done():
		}
		return r, true
	}
	if f.Reply != nil && hasCommand {
		s.journalExecute(sbID, command, "", 0)
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": f.Reply.ExitCode, "result": f.Reply.Result})
		return r, true
	}
	if f.Status != 0 {
		s.writeFault(w, r, f)
		return r, true
	}
	if f.DropWebSocketAfterBytes > 0 || f.HalfOpenAfterEnd || f.ExitCodeDelay > 0 || f.Reset || f.SlowBody > 0 {
		r = r.WithContext(context.WithValue(r.Context(), appliedFaultKey{}, f))
	}
	return r, false
}

func (s *Server) commandFaultsLocked() bool {
	for _, e := range s.faults {
		if e.f.Command != "" {
			return true
		}
	}
	return false
}

// peekCommand reads an execute request's command and puts the body back
// for the handler.
func peekCommand(r *http.Request) (string, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", false
	}
	var req struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(body, &req) != nil {
		return "", false
	}
	return req.Command, true
}

var lifecycleRE = regexp.MustCompile(`/(start|stop|pause|resize|recover|archive)$`)

// throttlerFor names the real rate limiter a route belongs to.
func throttlerFor(r *http.Request) string {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodPost && (p == "/api/sandbox" || strings.HasSuffix(p, "/fork")):
		return "sandbox-create"
	case strings.HasPrefix(p, "/api/sandbox/") && (r.Method == http.MethodDelete ||
		lifecycleRE.MatchString(p)):
		return "sandbox-lifecycle"
	default:
		return "authenticated"
	}
}

func (s *Server) writeFault(w http.ResponseWriter, r *http.Request, f *Fault) {
	if f.RetryAfter != "" {
		name := throttlerFor(r)
		w.Header().Set("Retry-After", f.RetryAfter)
		w.Header().Set("Retry-After-"+name, f.RetryAfter)
		if f.Status == http.StatusTooManyRequests {
			w.Header().Set("X-RateLimit-Limit-"+name, "300")
			w.Header().Set("X-RateLimit-Remaining-"+name, "0")
			w.Header().Set("X-RateLimit-Reset-"+name, f.RetryAfter)
		}
	}
	if f.EmptyBody {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(f.Status)
		return
	}
	if f.Body != "" {
		switch body := strings.TrimSpace(f.Body); {
		case strings.HasPrefix(body, "{"):
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
		case strings.HasPrefix(body, "<"):
			// A proxy's error page (nginx, a load balancer).
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		default:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		w.WriteHeader(f.Status)
		_, _ = w.Write([]byte(f.Body))
		return
	}
	switch {
	case f.Status == http.StatusTooManyRequests:
		writeJSON(w, f.Status, map[string]any{"statusCode": 429, "message": "Rate limit exceeded", "error": "Too Many Requests"})
	case strings.HasPrefix(r.URL.Path, "/toolbox/"):
		s.toolboxError(w, r, f.Status, "emulator fault: injected "+http.StatusText(f.Status))
	default:
		s.apiError(w, r, f.Status, "emulator fault: injected "+http.StatusText(f.Status))
	}
}
