package emulator

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Server is a local Daytona: control plane under /api, per-sandbox toolbox
// under /toolbox/{sandboxId}, admin hooks under /_emulator. It is an
// http.Handler; serve it with net/http or httptest.
type Server struct {
	opts     Options
	log      zerolog.Logger
	root     string
	ownsRoot bool
	shell    string
	mux      *http.ServeMux
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	bg       sync.WaitGroup // every goroutine the server owns, incl. long-lived handlers
	closeMu  sync.Mutex     // serialises Close

	clockOffset atomic.Int64 // nanoseconds added by AdvanceClock; lock-free so any path may read the clock

	mu          sync.Mutex // guards everything below; helpers named …Locked need it held
	closed      bool
	sandboxes   map[string]*sandbox // by ID
	snapshots   map[string]*snapshot
	faults      []*faultEntry
	nextFaultID int
	faultHits   []FaultHit
	requests    map[string]int
	recordings  map[*Recording]struct{}
	sshAccess   map[string]*sshAccess // by token
	issued      map[string]bool       // every secret handed out (IssuedSecrets)
	ptyIDs      []string              // every PTY session ID created (PTYSessionIDs)

	snapshotFaults []*snapshotFaultEntry
	procs          map[*proc]struct{} // every live process, across sandboxes
	timers         map[*clockTimer]struct{}
	timerSeq       uint64

	// afterPtyConnected, when set (by tests only), runs once a PTY client
	// has been sent "connected" and before its output starts to flow: the
	// window where a kill or an exit must still reach that client.
	afterPtyConnected func(sandboxID, ptyID string)
}

// ErrClosed is returned by operations on a closed Server.
var ErrClosed = errors.New("emulator: server closed")

// New builds a Server and starts its lifecycle timer loop.
func New(opts Options) (*Server, error) {
	log := zerolog.Nop()
	if opts.Logger != nil {
		log = opts.Logger.With().Str("component", "daytona-emulator").Logger()
	}
	root := opts.Root
	owns := false
	if root == "" {
		dir, err := os.MkdirTemp("", "daytona-emulator-")
		if err != nil {
			return nil, fmt.Errorf("emulator: create temporary root: %w", err)
		}
		root, owns = dir, true
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("emulator: resolve root: %w", err)
	}
	for _, sub := range []string{"sandboxes", "snapshots"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			return nil, fmt.Errorf("emulator: create %s folder: %w", sub, err)
		}
	}
	shell := opts.Shell
	if shell == "" {
		if p, err := exec.LookPath("bash"); err == nil {
			shell = p
		} else {
			shell = "/bin/sh"
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		log:       log,
		root:      root,
		ownsRoot:  owns,
		shell:     shell,
		ctx:       ctx,
		cancel:    cancel,
		sandboxes: map[string]*sandbox{},
		snapshots: map[string]*snapshot{},
		requests:  map[string]int{},
		sshAccess: map[string]*sshAccess{},
		procs:     map[*proc]struct{}{},
	}
	s.seedSnapshots()
	s.routes()
	s.mu.Lock()
	s.goLocked(s.reapLoop)
	s.mu.Unlock()
	return s, nil
}

// Root is the folder holding sandboxes and snapshots.
func (s *Server) Root() string { return s.root }

// Close kills every sandbox process, stops every goroutine the server owns,
// closes open WebSockets and removes the root if New created it. It is safe
// to call more than once.
func (s *Server) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cancel()
	for _, sb := range s.sandboxes {
		s.killSandboxLocked(sb)
	}
	procs := make([]*proc, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()

	// Processes were sent SIGKILL; wait for every one to be reaped so nothing
	// outlives Close. A process stuck in uninterruptible sleep cannot be helped.
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline.C:
			s.log.Error().Int("pid", p.pid).Msg("process did not exit after SIGKILL")
		}
	}
	s.bg.Wait()
	if s.ownsRoot {
		if err := os.RemoveAll(s.root); err != nil {
			return fmt.Errorf("emulator: remove root: %w", err)
		}
	}
	return nil
}

// goLocked runs f on a goroutine that Close waits for. It reports false, and
// does not run f, once the server is closed. s.mu must be held.
func (s *Server) goLocked(f func()) bool {
	if s.closed {
		return false
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f()
	}()
	return true
}

// hold registers a long-lived request handler (WebSocket, blocking wait) so
// Close waits for it. The handler must return soon after s.ctx is done.
func (s *Server) hold() (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.bg.Add(1)
	return s.bg.Done, true
}

// now is the emulator's clock: Options.Clock (or time.Now) plus the offset
// moved by AdvanceClock.
func (s *Server) now() time.Time {
	t := time.Now()
	if s.opts.Clock != nil {
		t = s.opts.Clock()
	}
	return t.Add(time.Duration(s.clockOffset.Load()))
}

// nowLocked is now, named for call sites that hold s.mu.
func (s *Server) nowLocked() time.Time { return s.now() }

// AdvanceClock moves the emulator's clock forward by d (on top of
// Options.Clock) and runs the lifecycle timers, so TTLs and auto-stop can be
// driven from outside the process.
func (s *Server) AdvanceClock(d time.Duration) {
	s.clockOffset.Add(int64(d))
	s.Reap()
}

// ServeHTTP counts the request, applies matching faults, checks auth and
// dispatches it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_emulator/") || r.URL.Path == "/_emulator" {
		if !s.bearerOK(r) {
			s.apiError(w, r, http.StatusUnauthorized, "Invalid credentials")
			return
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	_, pattern := s.mux.Handler(r)
	if pattern == "" || pattern == "/" {
		pattern = "UNMATCHED " + r.Method + " " + r.URL.Path
	}
	s.mu.Lock()
	s.requests[pattern]++
	if len(s.recordings) > 0 {
		rec := RequestRecord{Method: r.Method, Path: r.URL.Path, Route: pattern, SandboxID: s.sandboxIDForPathLocked(r.URL.Path)}
		for rc := range s.recordings {
			rc.add(rec)
		}
	}
	closed := s.closed
	s.mu.Unlock()
	if closed {
		s.apiError(w, r, http.StatusServiceUnavailable, "emulator is shutting down")
		return
	}
	s.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Str("route", pattern).Msg("request")
	s.Reap()

	r, handled := s.applyFaults(w, r)
	if handled {
		return
	}
	if f := appliedFault(r); f != nil && (f.Reset || f.SlowBody > 0) && r.Header.Get("Upgrade") == "" {
		w = s.newFaultyWriter(w, r, f)
	}
	if !s.authorized(r) {
		if strings.HasPrefix(r.URL.Path, "/toolbox/") {
			s.toolboxError(w, r, http.StatusUnauthorized, "unauthorized: authentication failed: Bearer token is invalid")
		} else {
			s.apiError(w, r, http.StatusUnauthorized, "Invalid credentials")
		}
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) bearerOK(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.opts.apiKey())) == 1
}

// authorized applies the route's auth rule: /api/config is public; toolbox
// routes also take the sandbox's preview token (header or query), like the proxy.
func (s *Server) authorized(r *http.Request) bool {
	if r.URL.Path == "/api/config" {
		return true
	}
	if s.bearerOK(r) {
		return true
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/toolbox/")
	if !ok {
		return false
	}
	id, _, _ := strings.Cut(rest, "/")
	tok := r.Header.Get("X-Daytona-Preview-Token")
	if tok == "" {
		tok = r.URL.Query().Get("DAYTONA_SANDBOX_AUTH_KEY")
	}
	if tok == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	return sb != nil && subtle.ConstantTimeCompare([]byte(tok), []byte(sb.previewTok)) == 1
}

// unhandled is the loud catch-all: a client calling a route the emulator does
// not know is almost always a client bug, so say exactly what was called.
func (s *Server) unhandled(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/socket.io/") {
		// The TS SDK probes its event gateway; it falls back to polling.
		http.NotFound(w, r)
		return
	}
	s.log.Warn().Str("method", r.Method).Str("path", r.URL.Path).Msg("no such route")
	writeJSON(w, http.StatusNotFound, map[string]any{
		"statusCode": http.StatusNotFound,
		"error":      "Not Found",
		"message": fmt.Sprintf("daytona emulator: no route for %s %s (client bug, or an endpoint the emulator does not implement)",
			r.Method, r.URL.Path),
		"path":      r.URL.Path,
		"method":    r.Method,
		"timestamp": isoTime(s.now()),
	})
}

// baseURL is scheme://host of the request, so URLs the emulator hands out
// (toolboxProxyUrl, build-logs URL) point back at whatever address the client
// used, including an httptest server.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
