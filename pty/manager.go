package pty

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

// Sink receives what the terminals produce. It is called from one goroutine
// per session, in order. An output call may block: that is how a slow host
// slows a terminal down. An error means nothing more can be delivered (the
// host is gone); the session then stops reading its terminal. data is only
// valid during the call.
type Sink interface {
	LoginOutput(r Route, text string) error
	LoginExit(r Route, exitCode *int) error
	DuplexData(r Route, data []byte) error
	DuplexExit(r Route, exitCode *int, transportClosed bool) error
}

// Route names a session: the host's route id and the session id the
// Manager minted for it. The host routes a duplex frame by the exact pair.
type Route struct {
	HostRouteID string
	SessionID   string
}

// Errors callers branch on.
var (
	// ErrNotOpen: no session by that id (or pair), or it belongs to
	// another route.
	ErrNotOpen = errors.New("not open")
	// ErrEnded: the session exists but its terminal has ended or is
	// being closed, so input cannot be applied.
	ErrEnded = errors.New("has ended")
	// ErrShutDown: the Manager has been closed.
	ErrShutDown = errors.New("pty: the worker is shutting down")
)

const (
	// defaultOutboxBytes bounds each session's queued output.
	defaultOutboxBytes = 256 << 10
	// defaultRemembered is how many closed routes are remembered, so a late
	// close is still acknowledged with its session (the host keeps at most
	// 4,096 closed pairs per worker before it retires the worker).
	defaultRemembered = 8192
	// killTimeout bounds one kill of a PTY.
	killTimeout = 10 * time.Second
	// exitWait is how long a teardown waits, after the kill, for the socket
	// to report the exit before it disconnects.
	exitWait = 5 * time.Second
	// loginPiece and duplexPiece bound one notification's payload: far
	// under the host's 1,000,000-unit text chunk and 262,144-byte data chunk.
	loginPiece  = 64 << 10
	duplexPiece = 192 << 10
)

// Options configure a Manager.
type Options struct {
	// Sink receives output and exits. Required.
	Sink Sink
	// NewID mints the UUID in session and PTY ids; default uuid.NewString.
	NewID func() string
	// Logger receives diagnostics (never terminal data).
	Logger zerolog.Logger
	// OutboxBytes bounds the output each session queues before it stops
	// reading its terminal; default 256 KiB.
	OutboxBytes int
	// Remember is how many closed routes are remembered; default 8192.
	Remember int
	// ErrorText words a failed terminal write in the message the host
	// reads; the worker passes its wording of Daytona's errors. Default
	// err.Error().
	ErrorText func(err error) string
}

// Manager owns every login PTY and duplex channel of a worker. It is safe
// for concurrent use.
type Manager struct {
	sink        Sink
	newID       func() string
	log         zerolog.Logger
	outboxBytes int
	errText     func(error) string

	base   context.Context // parent of every session's context; ends at Close
	cancel context.CancelFunc

	mu           sync.Mutex
	shut         bool
	running      int                 // pumps and background closes (see admit)
	idle         chan struct{}       // closed once shut and nothing runs
	logins       map[string]*session // host route id → live login session
	loginIDs     map[string]*session // session id → live login session
	duplexes     map[string]*session // host route id → live duplex channel
	closedLogins *memory             // closed login session ids → their route ids
	closedRoutes *memory             // closed login route ids
	// Closed duplex routes, route id → session id, in two memories so that
	// closes of routes the host never bound (failed opens, routes never
	// opened) cannot push out the pairs it did bind, which it retires the
	// worker for if a close does not echo them.
	closedDuplex *memory // routes whose open reply went out
	closedOther  *memory // the rest (session "" for a route never opened)
}

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.NewID == nil {
		opts.NewID = uuid.NewString
	}
	if opts.OutboxBytes <= 0 {
		opts.OutboxBytes = defaultOutboxBytes
	}
	if opts.Remember <= 0 {
		opts.Remember = defaultRemembered
	}
	if opts.ErrorText == nil {
		opts.ErrorText = func(err error) string { return err.Error() }
	}
	base, cancel := context.WithCancel(context.Background())
	return &Manager{
		sink: opts.Sink, newID: opts.NewID, log: opts.Logger, outboxBytes: opts.OutboxBytes, errText: opts.ErrorText,
		base: base, cancel: cancel, idle: make(chan struct{}),
		logins: map[string]*session{}, loginIDs: map[string]*session{}, duplexes: map[string]*session{},
		closedLogins: newMemory(opts.Remember), closedRoutes: newMemory(opts.Remember),
		closedDuplex: newMemory(opts.Remember), closedOther: newMemory(opts.Remember),
	}
}

// session is one login PTY or duplex channel.
type session struct {
	m     *Manager
	login bool
	route Route
	lease string
	uid   string // the UUID in the session, PTY (and diagnostics) names
	ptyID string

	ctx    context.Context // ends when the session is closed or abandoned
	cancel context.CancelFunc
	out    *outbox
	dec    textDecoder // login output; the pump's own

	mu      sync.Mutex
	term    *terminal // once connected
	opened  bool      // the open succeeded: input may be applied
	started bool      // Start(true) ran: the pump runs
	silent  bool      // emit nothing more: the host closed the route, or it never bound
	ending  bool      // a teardown is closing the terminal
	failed  error     // an input write failed; the terminal is being killed
}

func (s *session) kind() string {
	if s.login {
		return "Daytona login pseudo-terminal"
	}
	return "Daytona duplex channel"
}

// register adds a session in the opening state for a route never seen.
func (m *Manager) register(login bool, hostRouteID, lease string) (*session, error) {
	id := m.newID()
	s := &session{m: m, login: login, lease: lease, uid: id, out: newOutbox(m.outboxBytes)}
	if login {
		s.route = Route{HostRouteID: hostRouteID, SessionID: "pty-" + id}
		s.ptyID = "paperclip-login-pty-" + id
	} else {
		s.route = Route{HostRouteID: hostRouteID, SessionID: "duplex-" + id}
		s.ptyID = duplexPTYPrefix + id
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shut {
		return nil, ErrShutDown
	}
	// A route is opened once. A route already closed may be one the host
	// gave up on while its open was on the way (requests run concurrently,
	// so the close can be handled first): opening it now would emit for a
	// route the host no longer knows.
	if login {
		_, closed := m.closedRoutes.get(hostRouteID)
		if m.logins[hostRouteID] != nil || closed {
			return nil, fmt.Errorf("%s: route %q was already opened or closed", s.kind(), hostRouteID)
		}
		m.logins[hostRouteID] = s
		m.loginIDs[s.route.SessionID] = s
	} else {
		_, closed := m.closedDuplexRoute(hostRouteID)
		if m.duplexes[hostRouteID] != nil || closed {
			// Besides, a route's pair is bound once; reusing a route id would
			// let a late frame of the old channel land on the new one.
			return nil, fmt.Errorf("%s: route %q was already opened or closed", s.kind(), hostRouteID)
		}
		m.duplexes[hostRouteID] = s
	}
	s.ctx, s.cancel = context.WithCancel(m.base)
	return s, nil
}

// forget moves a session from the live tables to the closed memory.
// m.mu must be held.
func (m *Manager) forgetLocked(s *session) {
	if s.login {
		if m.logins[s.route.HostRouteID] == s {
			delete(m.logins, s.route.HostRouteID)
		}
		if m.loginIDs[s.route.SessionID] == s {
			delete(m.loginIDs, s.route.SessionID)
		}
		m.closedLogins.put(s.route.SessionID, s.route.HostRouteID)
		m.closedRoutes.put(s.route.HostRouteID, s.route.SessionID)
		return
	}
	if m.duplexes[s.route.HostRouteID] == s {
		delete(m.duplexes, s.route.HostRouteID)
	}
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		m.closedDuplex.put(s.route.HostRouteID, s.route.SessionID)
	} else {
		m.closedOther.put(s.route.HostRouteID, s.route.SessionID)
	}
}

// closedDuplexRoute returns the session a closed duplex route had ("" for
// one never opened). m.mu must be held.
func (m *Manager) closedDuplexRoute(hostRouteID string) (string, bool) {
	if sid, ok := m.closedDuplex.get(hostRouteID); ok {
		return sid, true
	}
	return m.closedOther.get(hostRouteID)
}

// Opening is a session whose open succeeded but whose reply has not gone
// out yet. Nothing it produces is emitted before Start.
type Opening struct{ s *session }

// Route returns the session's route and id.
func (o *Opening) Route() Route { return o.s.route }

// Start is called once the open's reply has been handled: written reports
// whether the host got the session id. With true, output and the exit begin
// to flow; with false the session is closed without a word, since the host
// never bound it.
func (o *Opening) Start(written bool) {
	s := o.s
	if !written {
		s.m.abandon(s)
		return
	}
	// The pump is admitted like any background work, under m.mu where Close
	// sets shut before it waits: a session Close does not know of (a host
	// close forgot it but has not silenced it yet) could otherwise start a
	// pump while Close waits, or after it returned.
	if !s.m.admit() {
		return
	}
	s.mu.Lock()
	if s.silent || s.started {
		s.mu.Unlock()
		s.m.release()
		return
	}
	s.started = true
	s.mu.Unlock()
	go s.pump()
}

// admit counts one goroutine Close must wait for; false once Close has
// begun.
func (m *Manager) admit() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shut {
		return false
	}
	m.running++
	return true
}

// release marks one goroutine counted by admit as finished.
func (m *Manager) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running--
	if m.shut && m.running == 0 {
		close(m.idle)
	}
}

// open runs step (the kind-specific opening) for a registered session,
// bounded by ctx and by the session's own life. On failure the session is
// closed without emitting anything.
func (m *Manager) open(ctx context.Context, s *session, step func(ctx context.Context) error) (*Opening, error) {
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	err := step(octx)
	if s.ctx.Err() != nil && ctx.Err() == nil {
		// Closed by the host or a lease teardown before the reply: whatever
		// the step managed, the session must not go live.
		err = fmt.Errorf("%s: %w", s.kind(), errClosedWhileOpening)
	}
	if err != nil {
		m.abandon(s)
		return nil, err
	}
	s.mu.Lock()
	s.opened = true
	s.mu.Unlock()
	return &Opening{s: s}, nil
}

var errClosedWhileOpening = errors.New("the route was closed while it was opening")

// setTerm records the connected terminal; false when the session was closed
// meanwhile (the caller's open then fails and cleans the terminal up).
func (s *session) setTerm(t *terminal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.term = t
	return !s.silent
}

// abandon closes a session that never reached the host (its open failed,
// was cancelled, or its reply could not be written): no output, no exit.
func (m *Manager) abandon(s *session) {
	m.mu.Lock()
	m.forgetLocked(s)
	m.mu.Unlock()
	s.silence()
}

// silence stops everything the session emits and closes its terminal in
// the background (killing its process).
func (s *session) silence() {
	s.mu.Lock()
	s.silent = true
	term := s.term
	s.mu.Unlock()
	s.cancel()
	s.out.drop()
	if term != nil {
		s.m.background(func(ctx context.Context) {
			_ = term.kill(ctx)
			term.disconnect()
		})
	}
}

// background runs fn on a goroutine the Manager waits for at Close; once
// Close has begun, it runs fn at once instead (Close may be waiting already).
func (m *Manager) background(fn func(ctx context.Context)) {
	if !m.admit() {
		fn(context.Background())
		return
	}
	go func() {
		defer m.release()
		fn(m.base)
	}()
}

// pump hands the session's output to the Sink, then its exit.
func (s *session) pump() {
	defer s.m.release()
	term := s.term
	for {
		b, res := s.out.take(term.done())
		switch res {
		case dropped:
			return
		case drained:
			if err := s.emitExit(term); err != nil {
				s.m.log.Debug().Err(err).Str("session", s.route.SessionID).Msg("cannot deliver a terminal's exit")
			}
			return
		}
		err := s.emit(b)
		s.out.release(b)
		if err != nil {
			s.m.log.Warn().Err(err).Str("session", s.route.SessionID).Msg("cannot deliver terminal output; closing its reader")
			s.out.drop()
			return
		}
	}
}

func (s *session) isSilent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.silent
}

func (s *session) emit(b []byte) error {
	piece := duplexPiece
	if s.login {
		piece = loginPiece
	}
	for len(b) > 0 {
		n := min(len(b), piece)
		if s.isSilent() {
			return nil
		}
		var err error
		if s.login {
			if text := s.dec.decode(b[:n], false); text != "" {
				err = s.m.sink.LoginOutput(s.route, text)
			}
		} else {
			err = s.m.sink.DuplexData(s.route, b[:n])
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (s *session) emitExit(term *terminal) error {
	if s.isSilent() {
		return nil
	}
	code, transportClosed := term.exit()
	if s.login {
		if text := s.dec.decode(nil, true); text != "" {
			if err := s.m.sink.LoginOutput(s.route, text); err != nil {
				return err
			}
		}
		return s.m.sink.LoginExit(s.route, code)
	}
	return s.m.sink.DuplexExit(s.route, code, transportClosed)
}

// input writes p to the session's terminal, in order, unless it has ended.
func (s *session) input(ctx context.Context, p []byte) error {
	s.mu.Lock()
	term, usable := s.term, s.opened && !s.silent && !s.ending && s.failed == nil
	s.mu.Unlock()
	if term == nil || !usable {
		return fmt.Errorf("%s: session %q %w; the input was not written", s.kind(), s.route.SessionID, ErrEnded)
	}
	select {
	case <-term.done():
		return fmt.Errorf("%s: session %q %w; the input was not written", s.kind(), s.route.SessionID, ErrEnded)
	default:
	}
	if len(p) == 0 {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	if err := term.send(wctx, p); err != nil {
		if s.ctx.Err() != nil {
			return fmt.Errorf("%s: session %q %w; the input was not written", s.kind(), s.route.SessionID, ErrEnded)
		}
		// A write that failed midway leaves the stream unusable: end it, as
		// the reference plugin does, so the host sees the channel end.
		s.mu.Lock()
		first := s.failed == nil
		if first {
			s.failed = err
		}
		s.mu.Unlock()
		if first {
			s.m.background(func(ctx context.Context) {
				_ = term.kill(ctx)
				waitOrTimeout(term.done(), exitWait)
				term.disconnect()
			})
		}
		return &writeError{text: fmt.Sprintf("%s: write to session %q failed: %s", s.kind(), s.route.SessionID, s.m.errText(err)), err: err}
	}
	return nil
}

// writeError is a terminal write that failed, worded for the host.
type writeError struct {
	text string
	err  error
}

func (e *writeError) Error() string { return e.text }
func (e *writeError) Unwrap() error { return e.err }

// stop kills the session's process; its exit is reported as usual.
func (s *session) stop(ctx context.Context) error {
	s.mu.Lock()
	term := s.term
	s.mu.Unlock()
	if term == nil {
		return nil
	}
	select {
	case <-term.done():
		return nil
	default:
	}
	return term.kill(ctx)
}

// end closes the session's terminal for a lease teardown or at shutdown:
// the process is killed, its exit awaited briefly, and the socket closed.
// The session stays known to the host, so its output and exit still flow
// (unless it is silent).
func (s *session) end(ctx context.Context) {
	s.mu.Lock()
	if s.ending {
		s.mu.Unlock()
		return // another teardown step is closing it already
	}
	s.ending = true
	term, started := s.term, s.started
	s.mu.Unlock()
	if !started {
		// Still opening (or awaiting Start): its open fails, or its pump
		// reports the exit once started.
		s.cancel()
	}
	if term == nil {
		return
	}
	if err := term.kill(ctx); err != nil {
		s.m.log.Debug().Err(err).Str("pty", s.ptyID).Msg("cannot kill a PTY; disconnecting")
	}
	wait := exitWait
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d))
	}
	waitOrTimeout(term.done(), wait)
	// Closing the socket waits for its reader, which waits for the host to
	// take what it already read: not something a teardown should wait on.
	s.m.background(func(context.Context) { term.disconnect() })
}

func waitOrTimeout(ch <-chan struct{}, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// CloseLease closes every login PTY and duplex channel opened on a lease
// (its release, stop or destroy, or the resume of a sandbox that was not
// running, which lost them). Sessions still opening fail; the others report
// their exit and stay known until the host closes their routes.
func (m *Manager) CloseLease(ctx context.Context, providerLeaseID string) {
	m.mu.Lock()
	var ss []*session
	for _, s := range m.logins {
		if s.lease == providerLeaseID {
			ss = append(ss, s)
		}
	}
	for _, s := range m.duplexes {
		if s.lease == providerLeaseID {
			ss = append(ss, s)
		}
	}
	m.mu.Unlock()
	endAll(ctx, ss)
}

func endAll(ctx context.Context, ss []*session) {
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.end(ctx)
		}()
	}
	wg.Wait()
}

// Close ends every session without emitting anything more (the host is
// told by the shutdown reply and the worker's exit), waiting for their
// goroutines until ctx ends.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if !m.shut && m.running == 0 {
		close(m.idle)
	}
	m.shut = true
	var ss []*session
	for _, s := range m.logins {
		ss = append(ss, s)
	}
	for _, s := range m.duplexes {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	for _, s := range ss {
		s.mu.Lock()
		s.silent = true
		s.mu.Unlock()
		s.out.drop()
	}
	endAll(ctx, ss)
	select {
	case <-m.idle:
	case <-ctx.Done():
	}
	m.cancel() // stops background kills still waiting
	// A context that ended before everything did is no failure when
	// everything has ended too (a shutdown whose input closed at once).
	select {
	case <-m.idle:
		return nil
	default:
		return ctx.Err()
	}
}
