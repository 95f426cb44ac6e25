package emulator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"
)

// ErrNotFound is returned by the state-manipulation methods for an unknown
// (or already deleted) sandbox.
var ErrNotFound = errors.New("emulator: sandbox not found")

// SandboxView is a snapshot of one sandbox for assertions and leak checks.
type SandboxView struct {
	ID                  string            `json:"id"`
	Name                string            `json:"name"`
	State               string            `json:"state"` // as the API reports it (derived)
	StoredState         string            `json:"storedState"`
	DesiredState        string            `json:"desiredState"`
	ErrorReason         string            `json:"errorReason,omitempty"`
	Recoverable         bool              `json:"recoverable"`
	Labels              map[string]string `json:"labels"`
	Snapshot            string            `json:"snapshot"`
	Target              string            `json:"target"`
	AutoStopInterval    int               `json:"autoStopInterval"`
	AutoArchiveInterval int               `json:"autoArchiveInterval"`
	AutoDeleteInterval  int               `json:"autoDeleteInterval"`
	AutoDestroyAt       *time.Time        `json:"autoDestroyAt,omitempty"`
	LastActivityAt      time.Time         `json:"lastActivityAt"`
	Dir                 string            `json:"dir"`       // the sandbox's root folder
	HomeDir             string            `json:"homeDir"`   // also the work dir
	Processes           int               `json:"processes"` // live OS processes: shells and everything they spawned
	Sessions            int               `json:"sessions"`
	PTYs                int               `json:"ptys"`
}

func (s *Server) viewLocked(sb *sandbox) SandboxView {
	v := SandboxView{
		ID: sb.id, Name: sb.name, State: sb.reportedState(), StoredState: sb.state, DesiredState: sb.desired,
		Recoverable: sb.recoverable, Labels: maps.Clone(sb.labels), Snapshot: sb.snapshotName,
		Target: sb.target, AutoStopInterval: sb.autoStop, AutoArchiveInterval: sb.autoArchive, AutoDeleteInterval: sb.autoDelete,
		LastActivityAt: sb.lastActivityAt, Dir: sb.dir, HomeDir: sb.home,
		Processes: liveMembers(procSessions(sb.procs)), Sessions: len(sb.sessions), PTYs: len(sb.ptys),
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	if sb.errorReason != nil {
		v.ErrorReason = *sb.errorReason
	}
	if sb.autoDestroyAt != nil {
		t := *sb.autoDestroyAt
		v.AutoDestroyAt = &t
	}
	return v
}

// Sandboxes lists every sandbox that still exists (destroying ones included),
// ordered by creation.
func (s *Server) Sandboxes() []SandboxView {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		list = append(list, sb)
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].createdAt.Equal(list[j].createdAt) {
			return list[i].createdAt.Before(list[j].createdAt)
		}
		return list[i].id < list[j].id
	})
	out := make([]SandboxView, 0, len(list))
	for _, sb := range list {
		out = append(out, s.viewLocked(sb))
	}
	return out
}

// PTYSessionIDs lists the ID of every PTY session created since the server
// started, in order, across sandboxes (deleted ones included). Sandbox
// processes share the machine's /tmp, so a test removes what the sessions
// it caused left there by their IDs.
func (s *Server) PTYSessionIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ptyIDs)
}

// Sandbox returns one sandbox by ID or name.
func (s *Server) Sandbox(idOrName string) (SandboxView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findLocked(idOrName)
	if sb == nil {
		return SandboxView{}, false
	}
	return s.viewLocked(sb), true
}

// LiveProcesses counts the live OS processes the emulator started, with
// everything they spawned in their sessions, across all sandboxes (0 after
// Close).
func (s *Server) LiveProcesses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return liveMembers(procSessions(s.procs))
}

func procSessions(procs map[*proc]struct{}) map[int]bool {
	sids := make(map[int]bool, len(procs))
	for p := range procs {
		sids[p.pid] = true
	}
	return sids
}

// Requests returns how many requests each route received, keyed by its
// pattern, e.g. "POST /api/sandbox/{idOrName}/stop" or
// "GET /toolbox/{sandboxId}/process/session/{sessionId}"; requests that
// matched no route are keyed "UNMATCHED <method> <path>". Admin calls are not counted.
func (s *Server) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.requests)
}

// RequestRecord is one request the emulator received.
type RequestRecord struct {
	Method    string
	Path      string
	Route     string // the matched pattern, as Requests keys it
	SandboxID string // the sandbox the request is about; "" when none
}

// Recording collects every request the emulator receives, in arrival order,
// from Record until Stop (admin calls excepted), so a test can assert the
// exact calls one operation made, e.g. that a command read the control
// plane once or not at all. Recordings may overlap.
type Recording struct {
	s    *Server
	mu   sync.Mutex
	reqs []RequestRecord
}

// Record starts a Recording.
func (s *Server) Record() *Recording {
	rc := &Recording{s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recordings == nil {
		s.recordings = map[*Recording]struct{}{}
	}
	s.recordings[rc] = struct{}{}
	return rc
}

func (rc *Recording) add(r RequestRecord) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs = append(rc.reqs, r)
}

// Stop ends the recording and returns what it collected.
func (rc *Recording) Stop() []RequestRecord {
	rc.s.mu.Lock()
	delete(rc.s.recordings, rc)
	rc.s.mu.Unlock()
	return rc.Requests()
}

// Requests returns what the recording collected so far.
func (rc *Recording) Requests() []RequestRecord {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

// Count is how many recorded requests matched route (a Requests key) and,
// unless sandboxID is "", were about that sandbox.
func (rc *Recording) Count(route, sandboxID string) int {
	n := 0
	for _, r := range rc.Requests() {
		if r.Route == route && (sandboxID == "" || r.SandboxID == sandboxID) {
			n++
		}
	}
	return n
}

// Routes lists the recorded requests' routes in arrival order.
func (rc *Recording) Routes() []string {
	var out []string
	for _, r := range rc.Requests() {
		out = append(out, r.Route)
	}
	return out
}

// ResetRequests zeroes the request counters.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = map[string]int{}
}

// StopBehindClientsBack does what the platform's auto-stop does: kills every
// process of the sandbox and marks it stopped at once, without any client
// asking. Files stay. An ephemeral sandbox (autoDeleteInterval 0) is then
// deleted by the next lifecycle check, as on the platform.
func (s *Server) StopBehindClientsBack(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findLocked(id)
	if sb == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	s.stopBehindBackLocked(sb)
	return nil
}

// SetError puts the sandbox in the error state with the given reason; its
// processes die. recoverable decides whether /recover is allowed. The state
// persists (every refresh reports it) until the sandbox is recovered or deleted.
func (s *Server) SetError(id, reason string, recoverable bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findLocked(id)
	if sb == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	s.killSandboxLocked(sb)
	sb.gen++ // cancel any pending step
	r := reason
	sb.errorReason, sb.recoverable = &r, recoverable
	s.setStateLocked(sb, stateError, desiredStarted)
	return nil
}

// MissingContainerReason is the errorReason Daytona reports when a sandbox's
// container vanished; the worker recognises exactly this text.
func MissingContainerReason(id string) string {
	return fmt.Sprintf("not found: failed to inspect sandbox container %s: Error response from daemon: No such container: %s", id, id)
}

// SetMissingContainer makes the sandbox report a vanished container (state
// error, not recoverable, MissingContainerReason) on every later refresh.
func (s *Server) SetMissingContainer(id string) error {
	s.mu.Lock()
	sb := s.findLocked(id)
	s.mu.Unlock()
	if sb == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return s.SetError(sb.id, MissingContainerReason(sb.id), false)
}

// SetProcessEnv sets environment variables for the sandbox's processes
// started from now on, as the toolbox's POST /env does (a PATH that lacks a
// tool makes the sandbox lack it).
func (s *Server) SetProcessEnv(id string, set map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.findLocked(id)
	if sb == nil {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if sb.daemonEnv == nil {
		sb.daemonEnv, sb.daemonUnset = map[string]string{}, map[string]bool{}
	}
	for k, v := range set {
		sb.daemonEnv[k] = v
		delete(sb.daemonUnset, k)
	}
	return nil
}
