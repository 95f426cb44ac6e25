package emulator

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"time"
)

// Stored states (the real entity's `state` column) and desired states.
const (
	stateUnknown          = "unknown"
	stateCreating         = "creating"
	stateStarting         = "starting"
	stateStarted          = "started"
	stateStopping         = "stopping"
	stateStopped          = "stopped"
	stateArchiving        = "archiving"
	stateArchived         = "archived"
	stateRestoring        = "restoring"
	stateDestroying       = "destroying"
	stateDestroyed        = "destroyed"
	stateError            = "error"
	stateBuildFailed      = "build_failed"
	statePendingBuild     = "pending_build"
	stateBuildingSnapshot = "building_snapshot"
	stateSnapshotting     = "snapshotting"

	desiredStarted   = "started"
	desiredStopped   = "stopped"
	desiredArchived  = "archived"
	desiredDestroyed = "destroyed"
)

// validListStates are the values GET /sandbox accepts in `states`.
var validListStates = map[string]bool{
	"creating": true, "restoring": true, "destroying": true, "started": true, "stopped": true,
	"starting": true, "stopping": true, "error": true, "build_failed": true, "pending_build": true,
	"building_snapshot": true, "unknown": true, "pulling_snapshot": true, "archived": true,
	"archiving": true, "resizing": true, "snapshotting": true, "forking": true, "pausing": true,
	"paused": true, "resuming": true,
}

const maxAutoArchiveInterval = 43200 // minutes; the self-hosted MAX_AUTO_ARCHIVE_INTERVAL

// sandbox is one emulated sandbox. Every field is guarded by Server.mu, except
// the paths, which never change after creation.
type sandbox struct {
	id           string
	name         string
	user         string
	snapshotName string
	target       string
	env          map[string]string
	labels       map[string]string
	public       bool
	netBlockAll  bool
	netAllowList *string
	domAllowList *string
	cpu, gpu     int
	memory, disk int
	volumes      []volumeJSON
	build        *buildInfoJSON

	state       string // stored state
	desired     string
	errorReason *string
	recoverable bool

	autoStop, autoPause, autoArchive, autoDelete int // minutes
	autoDestroyAt                                *time.Time

	createdAt, updatedAt, lastActivityAt, stoppedAt time.Time

	dir       string // the sandbox's folder
	home      string // user home, inside dir
	workDir   string
	daemonDir string // session logs and command files, outside the user's home

	gen     int           // bumped by every scheduled step; stale steps do nothing
	changed chan struct{} // closed and replaced on every state change

	sessions    map[string]*session
	ptys        map[string]*ptySession
	procs       map[*proc]struct{}
	daemonEnv   map[string]string // POST /env overrides
	daemonUnset map[string]bool
	external    map[string]bool // paths outside dir created through the file API
	journal     []ToolboxCall   // see Journal
	previewTok  string
	removed     bool
}

// reportedState derives the DTO's `state` from (stored, desired), as the real
// API's getSandboxState does.
func (sb *sandbox) reportedState() string {
	switch {
	case sb.state == stateStarted && sb.desired == desiredStopped:
		return stateStopping
	case sb.state == stateStarted && sb.desired == desiredDestroyed:
		return stateDestroying
	case sb.state == stateStopped && sb.desired == desiredStarted:
		return stateStarting
	case sb.state == stateStopped && sb.desired == desiredDestroyed:
		return stateDestroying
	case sb.state == stateStopped && sb.desired == desiredArchived:
		return stateArchiving
	case sb.state == stateUnknown && sb.desired == desiredStarted:
		return stateCreating
	}
	return sb.state
}

// archiving reports a sandbox on its way to the archive.
func (sb *sandbox) archiving() bool {
	return sb.desired == desiredArchived && (sb.state == stateStopped || sb.state == stateArchiving)
}

// inTransition reports whether a state change is running, which makes other
// lifecycle calls answer 409 (a start or a delete of an archiving sandbox
// goes through, see handleStart and handleDelete).
func (sb *sandbox) inTransition() bool {
	if sb.state == stateError || sb.state == stateBuildFailed {
		return false
	}
	return sb.state != sb.desired
}

// reachable reports whether the toolbox can reach the sandbox's daemon.
func (sb *sandbox) reachable() bool {
	if sb.removed || sb.desired == desiredDestroyed || sb.desired == desiredStopped || sb.desired == desiredArchived {
		return false
	}
	return sb.state == stateStarted || sb.state == stateSnapshotting
}

func (sb *sandbox) errored() bool {
	return sb.state == stateError || sb.state == stateBuildFailed
}

// setStateLocked records a state change and wakes whoever waits on it.
func (s *Server) setStateLocked(sb *sandbox, state, desired string) {
	if sb.state == stateStarted && state == stateStopped {
		sb.stoppedAt = s.nowLocked()
	}
	sb.state, sb.desired = state, desired
	sb.updatedAt = s.nowLocked()
	if state == stateStarted {
		sb.lastActivityAt = sb.updatedAt // a (re)start is activity: auto-stop counts from here
	}
	close(sb.changed)
	sb.changed = make(chan struct{})
}

// stepLocked runs fn (with s.mu held) after one step delay, unless another
// step was scheduled for sb in between, sb was removed, or the server closed.
// With Synchronous steps fn runs at once.
func (s *Server) stepLocked(sb *sandbox, fn func()) {
	s.stepAfterLocked(sb, s.opts.stepDelay(), fn)
}

// stepAfterLocked is stepLocked for a step that lasts d.
func (s *Server) stepAfterLocked(sb *sandbox, d time.Duration, fn func()) {
	sb.gen++
	gen := sb.gen
	s.afterLocked(d, func() {
		if sb.removed || sb.gen != gen {
			return
		}
		fn()
	})
}

// afterStepLocked runs fn with s.mu held after one step delay (at once with
// Synchronous steps), unless the server closes first. s.mu must be held.
func (s *Server) afterStepLocked(fn func()) {
	s.afterLocked(s.opts.stepDelay(), fn)
}

// findLocked resolves an ID or, failing that, a live name.
func (s *Server) findLocked(idOrName string) *sandbox {
	if sb := s.sandboxes[idOrName]; sb != nil && !sb.removed {
		return sb
	}
	for _, sb := range s.sandboxes {
		if sb.name == idOrName && !sb.removed && sb.desired != desiredDestroyed {
			return sb
		}
	}
	return nil
}

// nameTakenLocked reports whether a live sandbox already uses name. Deleted
// sandboxes free their name at once (the real API renames them).
func (s *Server) nameTakenLocked(name string) bool {
	for _, sb := range s.sandboxes {
		if sb.name == name && !sb.removed && sb.desired != desiredDestroyed {
			return true
		}
	}
	return false
}

// startLocked begins a start (from stopped) or restore (from archived).
func (s *Server) startLocked(sb *sandbox) {
	if sb.state == stateArchived {
		s.setStateLocked(sb, stateRestoring, desiredStarted)
	} else {
		s.setStateLocked(sb, stateStopped, desiredStarted)
	}
	s.stepLocked(sb, func() { s.setStateLocked(sb, stateStarted, desiredStarted) })
}

// stopLocked kills the sandbox's processes (its files stay) and moves it
// through stopping to stopped.
func (s *Server) stopLocked(sb *sandbox) {
	s.killSandboxLocked(sb)
	s.setStateLocked(sb, stateStarted, desiredStopped)
	s.stepLocked(sb, func() { s.setStateLocked(sb, stateStopped, desiredStopped) })
}

// destroyLocked kills everything and deletes the sandbox after one step:
// destroying, then gone (GET answers 404).
func (s *Server) destroyLocked(sb *sandbox) {
	s.killSandboxLocked(sb)
	s.setStateLocked(sb, stateDestroying, desiredDestroyed)
	s.stepLocked(sb, func() { s.removeLocked(sb) })
}

// removeLocked forgets the sandbox and deletes its folder and any file it
// created outside the folder through the file API.
func (s *Server) removeLocked(sb *sandbox) {
	sb.removed = true
	sb.state = stateDestroyed
	close(sb.changed)
	sb.changed = make(chan struct{})
	delete(s.sandboxes, sb.id)
	for tok, a := range s.sshAccess {
		if a.sandboxID == sb.id {
			delete(s.sshAccess, tok)
		}
	}
	// Move the folder out of the way at once (the path is gone when the
	// sandbox is), delete the bytes off the lock.
	trash := filepath.Join(s.root, "trash", sb.id)
	var gone []string
	if err := os.MkdirAll(filepath.Dir(trash), 0o755); err == nil && os.Rename(sb.dir, trash) == nil {
		gone = append(gone, trash)
	} else {
		gone = append(gone, sb.dir)
	}
	for p := range sb.external {
		gone = append(gone, p)
	}
	remove := func() {
		for _, p := range gone {
			if err := os.RemoveAll(p); err != nil {
				s.log.Error().Err(err).Str("sandbox", sb.id).Msg("remove sandbox files")
			}
		}
	}
	if !s.goLocked(remove) {
		remove()
	}
}

// reapLocked applies the lifecycle timers: TTL (destroy whatever the state),
// auto-stop, auto-delete and auto-archive.
func (s *Server) reapLocked(now time.Time) {
	for _, sb := range s.sandboxes {
		if sb.removed || sb.desired == desiredDestroyed {
			continue
		}
		if sb.autoDestroyAt != nil && !now.Before(*sb.autoDestroyAt) {
			s.log.Info().Str("sandbox", sb.id).Msg("TTL elapsed: destroying")
			s.destroyLocked(sb)
			continue
		}
		idle := func(since time.Time, minutes int) bool {
			return now.Sub(since) >= time.Duration(minutes)*time.Minute
		}
		switch {
		case sb.state == stateStarted && sb.desired == desiredStarted && sb.autoStop > 0 && idle(sb.lastActivityAt, sb.autoStop):
			s.log.Info().Str("sandbox", sb.id).Msg("auto-stop")
			s.stopBehindBackLocked(sb)
		case sb.state == stateStopped && sb.desired == desiredStopped && sb.autoDelete >= 0 && idle(sb.stoppedAt, sb.autoDelete):
			s.log.Info().Str("sandbox", sb.id).Msg("auto-delete")
			s.destroyLocked(sb)
		case sb.state == stateStopped && sb.desired == desiredStopped && sb.autoArchive > 0 && idle(sb.stoppedAt, sb.autoArchive):
			s.log.Info().Str("sandbox", sb.id).Msg("auto-archive")
			s.setStateLocked(sb, stateArchived, desiredArchived)
		}
	}
}

// stopBehindBackLocked is what the platform does on auto-stop: processes die,
// the sandbox is stopped at once, no client asked.
func (s *Server) stopBehindBackLocked(sb *sandbox) {
	s.killSandboxLocked(sb)
	sb.gen++ // cancel any pending step
	s.setStateLocked(sb, stateStopped, desiredStopped)
	sb.stoppedAt = s.nowLocked()
}

// Reap runs the lifecycle timers now (they also run before every request and
// every Options.ReapInterval), after the delays that Options.ClockTimers puts
// on the emulator's clock.
func (s *Server) Reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	now := s.nowLocked()
	s.fireTimersLocked(now)
	s.reapLocked(now)
}

func (s *Server) reapLoop() {
	t := time.NewTicker(s.opts.reapInterval())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.Reap()
		}
	}
}

// touchLocked records activity (resets the auto-stop timer).
func (s *Server) touchLocked(sb *sandbox) {
	sb.lastActivityAt = s.nowLocked()
}

// newSandboxFolders creates the sandbox's folder, home and daemon folder.
func (s *Server) newSandboxFolders(sb *sandbox) error {
	sb.dir = filepath.Join(s.root, "sandboxes", sb.id)
	sb.home = filepath.Join(sb.dir, "home", sb.user)
	sb.workDir = sb.home
	sb.daemonDir = filepath.Join(sb.dir, "daemon")
	for _, d := range []string{sb.home, sb.daemonDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// token returns n random characters from [A-Za-z0-9], like the real SSH and
// preview tokens (URL alphabet without '-' and '_').
func token(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("emulator: crypto/rand failed: " + err.Error())
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
