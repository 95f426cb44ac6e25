package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
)

// leases holds every piece of per-lease state the worker keeps, keyed by
// scope.key(): the sandbox handle cache, the teardown and activity gates,
// the admission tombstone and the persistent session id. One mutex guards
// the table; nothing blocks while holding it.
type leases struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]*leaseEntry
	// sessionUses counts, by session id, the commands running in each
	// persistent session; see useSession.
	sessionUses map[string]*sessionUse
}

// sessionUse is what the worker knows of one persistent session's commands.
type sessionUse struct {
	running int
	// retired: a command in it timed out, so the session is to be deleted
	// (killing that command) once no other command runs in it.
	retired bool
}

type leaseEntry struct {
	// sc is the scope the entry is keyed by, once a call has named it
	// (login PTY and duplex opens find a lease by its provider lease id).
	sc       *scope
	handle   *handle
	teardown *gate
	activity *gate
	// closed is the admission tombstone: set by release/stop/destroy, cleared
	// by acquire/resume. While set, new activity is refused.
	closed   bool
	closedAt time.Time

	sessionID     string
	sessionFlight *flight[string]
}

func newLeases(now func() time.Time) *leases {
	return &leases{now: now, entries: map[string]*leaseEntry{}, sessionUses: map[string]*sessionUse{}}
}

// entryLocked returns the entry for key, creating it. l.mu must be held.
func (l *leases) entryLocked(key string) *leaseEntry {
	e := l.entries[key]
	if e == nil {
		e = &leaseEntry{}
		l.entries[key] = e
	}
	return e
}

// forgetIfIdleLocked drops an entry that holds nothing. l.mu must be held.
// An entry's scope alone does not keep it.
func (l *leases) forgetIfIdleLocked(key string, e *leaseEntry) {
	if e.handle == nil && e.teardown == nil && e.activity == nil && !e.closed &&
		e.sessionID == "" && e.sessionFlight == nil {
		delete(l.entries, key)
	}
}

// tombstoneTTL bounds how long a closed lease's tombstone is remembered; a
// host never comes back to a released lease days later, and the table must
// not grow without bound in a long-lived worker.
const tombstoneTTL = 24 * time.Hour

func (l *leases) pruneTombstonesLocked(now time.Time) {
	for k, e := range l.entries {
		if e.closed && now.Sub(e.closedAt) > tombstoneTTL && e.teardown == nil && e.activity == nil {
			e.closed = false
			l.forgetIfIdleLocked(k, e)
		}
	}
}

// ---- gates ----

// gate is a reference-counted latch: done closes when the last holder ends.
// A slot holding one is nil while nobody holds it (holdGate, releaseGate;
// the slot's owner serialises both).
type gate struct {
	refs    int
	done    chan struct{}
	waiting atomic.Int32 // callers blocked on done (tests wait for them)
}

// holdGate adds a holder to the gate in *slot, making one if it is empty.
func holdGate(slot **gate) {
	if *slot == nil {
		*slot = &gate{done: make(chan struct{})}
	}
	(*slot).refs++
}

// releaseGate drops a holder of the gate in *slot and reports whether it
// was the last: then done is closed and the slot emptied.
func releaseGate(slot **gate) bool {
	g := *slot
	g.refs--
	if g.refs > 0 {
		return false
	}
	close(g.done)
	*slot = nil
	return true
}

func (l *leases) beginTeardown(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	holdGate(&l.entryLocked(key).teardown)
}

func (l *leases) endTeardown(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	if e == nil || e.teardown == nil {
		return
	}
	if releaseGate(&e.teardown) {
		l.forgetIfIdleLocked(key, e)
	}
}

// activityActive reports whether any activity holds the lease.
func (l *leases) activityActive(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	return e != nil && e.activity != nil
}

// waitForIdle waits until no activity holds the lease, or ctx ends.
func (l *leases) waitForIdle(ctx context.Context, key string) error {
	l.mu.Lock()
	e := l.entries[key]
	var done chan struct{}
	if e != nil && e.activity != nil {
		done = e.activity.done
	}
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errLeaseInactive is returned for activity on a lease whose admission is
// closed, with the plugin's exact message.
type errLeaseInactive struct{ providerLeaseID string }

func (e *errLeaseInactive) Error() string {
	return fmt.Sprintf("Daytona sandbox lease %s is no longer active.", e.providerLeaseID)
}

// withActivity runs fn as activity on the lease: it waits out any teardown in
// progress, refuses a closed lease (unless allowClosed), and holds the
// activity gate while fn runs so that a graceful teardown waits for it.
func (l *leases) withActivity(ctx context.Context, sc scope, allowClosed bool, fn func() (any, error)) (any, error) {
	key := sc.key()
	for {
		l.mu.Lock()
		e := l.entryLocked(key)
		if !allowClosed && e.closed {
			l.mu.Unlock()
			return nil, &errLeaseInactive{sc.providerLeaseID}
		}
		if td := e.teardown; td != nil {
			l.mu.Unlock()
			td.waiting.Add(1)
			select {
			case <-td.done:
				td.waiting.Add(-1)
				continue
			case <-ctx.Done():
				td.waiting.Add(-1)
				return nil, ctx.Err()
			}
		}
		holdGate(&e.activity)
		l.mu.Unlock()
		break
	}
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		e := l.entries[key]
		if releaseGate(&e.activity) {
			l.forgetIfIdleLocked(key, e)
		}
	}()
	return fn()
}

// ---- admission ----

func (l *leases) open(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entryLocked(key)
	e.closed = false
}

func (l *leases) close(sc scope) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.pruneTombstonesLocked(now)
	e := l.entryLocked(sc.key())
	e.closed, e.closedAt = true, now
	e.sc = &sc
}

func (l *leases) isClosed(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	return e != nil && e.closed
}

// closing reports whether the lease is closed or a teardown of it is under
// way: work admitted before must not start its sandbox again or open a
// session in it.
func (l *leases) closing(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	return e != nil && (e.closed || e.teardown != nil)
}

// ---- handle cache ----

// handle is one cached sandbox. The sandbox value is refreshed in place so
// every holder sees the latest provider state, as the SDK's Sandbox object.
type handle struct {
	ready   chan struct{} // closed when the first fetch settles
	err     error         // the first fetch's error; set before ready closes
	waiting atomic.Int32  // callers blocked on ready (tests wait for them)

	mu         sync.Mutex
	sandbox    *daytona.Sandbox
	verifiedAt time.Time
}

func (h *handle) snapshot() *daytona.Sandbox {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := *h.sandbox
	return &s
}

func (h *handle) update(s *daytona.Sandbox) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sandbox = s
}

// errHandleMismatch is the plugin's fail-closed check that a handle belongs
// to the lease that asked for it.
func errHandleMismatch(got, want string) error {
	return fmt.Errorf("Daytona sandbox handle mismatch: handle %s does not belong to lease %s.", got, want)
}

// getHandle returns the cached handle for the lease, fetching it on a miss.
// Concurrent misses share one fetch. hit reports whether the cache served
// it. A failed fetch is never cached.
func (l *leases) getHandle(ctx context.Context, sc scope, fetch func(ctx context.Context) (*daytona.Sandbox, error)) (h *handle, hit bool, err error) {
	key := sc.key()
	l.mu.Lock()
	e := l.entryLocked(key)
	if e.handle != nil {
		h = e.handle
		l.mu.Unlock()
		h.waiting.Add(1)
		select {
		case <-h.ready:
			h.waiting.Add(-1)
		case <-ctx.Done():
			h.waiting.Add(-1)
			return nil, true, ctx.Err()
		}
		if h.err != nil {
			return nil, true, h.err
		}
		if id := h.snapshot().ID; !sc.owns(id) {
			l.evictHandle(key, h)
			return nil, true, errHandleMismatch(id, sc.providerLeaseID)
		}
		return h, true, nil
	}
	h = &handle{ready: make(chan struct{}), verifiedAt: l.now()}
	e.handle = h
	e.sc = &sc
	l.mu.Unlock()

	sbx, err := fetch(ctx)
	if err == nil && !sc.owns(sbx.ID) {
		err = errHandleMismatch(sbx.ID, sc.providerLeaseID)
	}
	if err != nil {
		h.err = err
		close(h.ready)
		l.evictHandle(key, h)
		return nil, false, err
	}
	h.sandbox = sbx
	close(h.ready)
	return h, false, nil
}

// seedHandle caches a sandbox the caller already holds (fresh from create).
func (l *leases) seedHandle(sc scope, sbx *daytona.Sandbox) error {
	if !sc.owns(sbx.ID) {
		return errHandleMismatch(sbx.ID, sc.providerLeaseID)
	}
	h := &handle{ready: make(chan struct{}), sandbox: sbx, verifiedAt: l.now()}
	close(h.ready)
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entryLocked(sc.key())
	e.handle, e.sc = h, &sc
	return nil
}

// evictHandle drops the cached handle for key; with h set, only if it is
// still that handle (a newer one must not be clobbered).
func (l *leases) evictHandle(key string, h *handle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	if e == nil || e.handle == nil || (h != nil && e.handle != h) {
		return
	}
	e.handle = nil
	l.forgetIfIdleLocked(key, e)
}

// dropHandles empties the handle cache (at shutdown).
func (l *leases) dropHandles() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.entries {
		e.handle = nil
		l.forgetIfIdleLocked(k, e)
	}
}

// markFresh records that the lease's handle was just confirmed live.
func (l *leases) markFresh(key string) {
	l.mu.Lock()
	e := l.entries[key]
	var h *handle
	if e != nil {
		h = e.handle
	}
	l.mu.Unlock()
	if h == nil {
		return
	}
	h.mu.Lock()
	h.verifiedAt = l.now()
	h.mu.Unlock()
}

// stale reports whether the handle has gone unconfirmed for at least half
// the auto-stop interval, so its "started" state may be out of date.
func (l *leases) stale(h *handle, autoStopMinutes float64) bool {
	if autoStopMinutes <= 0 {
		return false
	}
	threshold := time.Duration(autoStopMinutes*60_000*0.5) * time.Millisecond
	h.mu.Lock()
	defer h.mu.Unlock()
	return l.now().Sub(h.verifiedAt) >= threshold
}

// knownLease is a lease found by its provider lease id.
type knownLease struct {
	sc     scope
	h      *handle // nil when no sandbox is cached for it
	closed bool    // its admission is closed (released, stopped, destroyed)
}

// findByProviderLeaseID returns what the worker knows of a lease from its
// provider lease id, company and environment (login PTY and duplex opens
// carry nothing else): a cached sandbox when there is one, else the lease's
// admission tombstone; ok is false when the worker knows neither.
func (l *leases) findByProviderLeaseID(id, companyID, environmentID string) (found knownLease, ok bool) {
	if id == "" {
		return knownLease{}, false
	}
	type candidate struct {
		sc     scope
		h      *handle
		closed bool
	}
	l.mu.Lock()
	var candidates []candidate
	for _, e := range l.entries {
		if e.sc != nil && e.sc.providerLeaseID == id && e.sc.companyID == companyID && e.sc.environmentID == environmentID {
			candidates = append(candidates, candidate{*e.sc, e.handle, e.closed})
		}
	}
	l.mu.Unlock()
	for _, c := range candidates {
		if c.closed {
			return knownLease{sc: c.sc, closed: true}, true
		}
	}
	for _, c := range candidates {
		if c.h == nil {
			continue
		}
		select {
		case <-c.h.ready:
		default:
			continue // still fetching; cannot vouch for it yet
		}
		if c.h.err == nil && c.h.snapshot().ID == id {
			return knownLease{sc: c.sc, h: c.h}, true
		}
	}
	return knownLease{}, false
}

// ---- persistent session ids ----

func (l *leases) sessionID(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e != nil {
		return e.sessionID
	}
	return ""
}

// takeSessionID clears and returns the lease's session id, so a late
// teardown cannot clear a session opened after it.
func (l *leases) takeSessionID(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entries[key]
	if e == nil {
		return ""
	}
	id := e.sessionID
	e.sessionID = ""
	l.forgetIfIdleLocked(key, e)
	return id
}

// forgetSession clears the lease's session id if it is still id.
func (l *leases) forgetSession(key, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e != nil && e.sessionID == id {
		e.sessionID = ""
		l.forgetIfIdleLocked(key, e)
	}
}

// useSession records a command about to run in session id of the lease, and
// reports false (recording nothing) when id is no longer the lease's session:
// a command that timed out retired it, or a teardown took it, meanwhile.
// Each true must be matched by one leaveSession.
func (l *leases) useSession(key, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e == nil || e.sessionID != id {
		return false
	}
	u := l.sessionUses[id]
	if u == nil {
		u = &sessionUse{}
		l.sessionUses[id] = u
	}
	u.running++
	return true
}

// leaveSession records the end of a command that useSession recorded, and
// reports whether the session must now be deleted: it was retired and this
// was the last command running in it.
func (l *leases) leaveSession(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.sessionUses[id]
	if u == nil {
		return false
	}
	u.running--
	if u.running > 0 {
		return false
	}
	delete(l.sessionUses, id)
	return u.retired
}

// retireSession forgets session id of the lease (the next command opens a
// fresh one) and marks it for deletion once its last running command ends.
// Deleting it at once would kill every other command of the lease running
// in it, not only the one that timed out.
func (l *leases) retireSession(key, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e != nil && e.sessionID == id {
		e.sessionID = ""
		l.forgetIfIdleLocked(key, e)
	}
	if u := l.sessionUses[id]; u != nil {
		u.retired = true
	}
}

// sessionOrCreate returns the lease's session id, creating the session once
// for concurrent first commands.
func (l *leases) sessionOrCreate(ctx context.Context, key string, create func(ctx context.Context) (string, error)) (string, error) {
	l.mu.Lock()
	e := l.entryLocked(key)
	if e.sessionID != "" {
		id := e.sessionID
		l.mu.Unlock()
		return id, nil
	}
	f := e.sessionFlight
	leader := f == nil
	if leader {
		f = newFlight[string]()
		e.sessionFlight = f
	}
	l.mu.Unlock()

	if !leader {
		return f.wait(ctx)
	}
	id, err := create(ctx)
	l.mu.Lock()
	e = l.entryLocked(key)
	if err == nil {
		e.sessionID = id
	}
	e.sessionFlight = nil
	l.mu.Unlock()
	f.settle(id, err)
	return id, err
}

// flight is one in-progress computation that others can wait for.
type flight[T any] struct {
	done    chan struct{}
	v       T
	err     error
	waiting atomic.Int32 // callers blocked in wait (tests wait for them)
}

func newFlight[T any]() *flight[T] { return &flight[T]{done: make(chan struct{})} }

func (f *flight[T]) settle(v T, err error) {
	f.v, f.err = v, err
	close(f.done)
}

func (f *flight[T]) wait(ctx context.Context) (T, error) {
	f.waiting.Add(1)
	defer f.waiting.Add(-1)
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
