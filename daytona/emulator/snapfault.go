package emulator

import (
	"slices"
	"time"
)

// SnapshotOutcome is how a snapshot taken from a sandbox ends.
type SnapshotOutcome string

// Snapshot outcomes.
const (
	// SnapshotSucceeds creates the snapshot (the default).
	SnapshotSucceeds SnapshotOutcome = ""
	// SnapshotJobFails is the runner's job failing, as the real job handler
	// treats it: the sandbox returns to its state and no snapshot is created.
	// A client waiting on the sandbox's state cannot tell it from a success.
	SnapshotJobFails SnapshotOutcome = "fail"
	// SnapshotSandboxErrors leaves the sandbox in the error state with the
	// fault's Reason (not recoverable), and creates no snapshot.
	SnapshotSandboxErrors SnapshotOutcome = "error"
)

// SnapshotFault changes how the next snapshots taken from sandboxes end.
type SnapshotFault struct {
	SandboxID string // only snapshots of this sandbox; "" = any
	Times     int    // how many snapshots it affects; 0 = unlimited
	// Hold keeps the sandbox snapshotting this long instead of one step (a
	// slow job: a client's wait can time out before it ends).
	Hold time.Duration
	// Until, when set, keeps the sandbox snapshotting until it is closed (a
	// job whose end the test decides); it takes precedence over Hold.
	Until   <-chan struct{}
	Outcome SnapshotOutcome
	Reason  string // the error reason with SnapshotSandboxErrors
}

type snapshotFaultEntry struct {
	id   int
	f    SnapshotFault
	left int
}

// AddSnapshotFault installs f and returns a function that removes it. The
// first matching fault, in the order added, applies.
func (s *Server) AddSnapshotFault(f SnapshotFault) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFaultID++
	id := s.nextFaultID
	s.snapshotFaults = append(s.snapshotFaults, &snapshotFaultEntry{id: id, f: f, left: f.Times})
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.snapshotFaults = slices.DeleteFunc(s.snapshotFaults, func(e *snapshotFaultEntry) bool { return e.id == id })
	}
}

// ClearSnapshotFaults removes every snapshot fault.
func (s *Server) ClearSnapshotFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshotFaults = nil
}

// takeSnapshotFaultLocked returns the fault that applies to a snapshot of
// the sandbox (the zero fault when none does), counting the use.
func (s *Server) takeSnapshotFaultLocked(sandboxID string) SnapshotFault {
	for i, e := range s.snapshotFaults {
		if e.f.SandboxID != "" && e.f.SandboxID != sandboxID {
			continue
		}
		if e.f.Times > 0 {
			e.left--
			if e.left <= 0 {
				s.snapshotFaults = slices.Delete(s.snapshotFaults, i, i+1)
			}
		}
		return e.f
	}
	return SnapshotFault{}
}

// Snapshots lists the names of the snapshots that exist, general ones
// included, sorted.
func (s *Server) Snapshots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.snapshots))
	for _, sn := range s.snapshots {
		names = append(names, sn.name)
	}
	slices.Sort(names)
	return names
}

// issueSecretLocked records a credential handed to a client (SSH and
// preview tokens), so tests can prove none of them leaked anywhere.
func (s *Server) issueSecretLocked(secret string) {
	if secret == "" {
		return
	}
	if s.issued == nil {
		s.issued = map[string]bool{}
	}
	s.issued[secret] = true
}

// IssuedSecrets returns every SSH token and preview token the server has
// handed out, sorted (those of deleted sandboxes included).
func (s *Server) IssuedSecrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.issued))
	for k := range s.issued {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
