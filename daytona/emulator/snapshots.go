package emulator

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

const (
	snapshotPending = "pending"
	snapshotActive  = "active"
)

type snapshot struct {
	id, name, imageName, state string
	general                    bool
	cpu, gpu, mem, disk        int
	createdAt, updatedAt       time.Time
	lastUsedAt                 *time.Time
	sourceSandboxID            *string
	filesDir                   string // a copy of the source sandbox's home; "" for image snapshots
}

// seedSnapshots registers the Cloud's general snapshots.
func (s *Server) seedSnapshots() {
	now := s.now()
	for i, def := range []struct {
		name                string
		cpu, gpu, mem, disk int
	}{
		{"daytona-small", 1, 0, 1, 3},
		{"daytona-medium", 2, 0, 4, 8},
		{"daytona-large", 4, 0, 8, 10},
	} {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
		s.snapshots[id] = &snapshot{
			id: id, name: def.name, imageName: "daytonaio/sandbox:0.218.0", state: snapshotActive, general: true,
			cpu: def.cpu, gpu: def.gpu, mem: def.mem, disk: def.disk, createdAt: now, updatedAt: now,
		}
	}
	if s.snapshots[s.opts.defaultSnapshot()] == nil && s.findSnapshotLocked(s.opts.defaultSnapshot()) == nil {
		id := uuid.NewString()
		s.snapshots[id] = &snapshot{
			id: id, name: s.opts.defaultSnapshot(), imageName: "daytonaio/sandbox:0.218.0", state: snapshotActive,
			general: true, cpu: 1, mem: 1, disk: 3, createdAt: now, updatedAt: now,
		}
	}
}

func (s *Server) findSnapshotLocked(idOrName string) *snapshot {
	if sn := s.snapshots[idOrName]; sn != nil {
		return sn
	}
	for _, sn := range s.snapshots {
		if sn.name == idOrName {
			return sn
		}
	}
	return nil
}

func (s *Server) snapshotDTOLocked(sn *snapshot) snapshotJSON {
	d := snapshotJSON{
		ID: sn.id, General: sn.general, Name: sn.name, ImageName: sn.imageName, State: sn.state,
		Entrypoint: nil, CPU: sn.cpu, GPU: sn.gpu, Mem: sn.mem, Disk: sn.disk,
		CreatedAt: isoTime(sn.createdAt), UpdatedAt: isoTime(sn.updatedAt),
		RegionIDs: []string{s.opts.target()}, Ref: sn.imageName, SourceSandboxID: sn.sourceSandboxID,
		SandboxClass: sandboxClass,
	}
	if !sn.general {
		d.OrganizationID = s.opts.organizationID()
	}
	if sn.lastUsedAt != nil {
		v := isoTime(*sn.lastUsedAt)
		d.LastUsedAt = &v
	}
	return d
}

func (s *Server) handleGetSnapshot(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("idOrName")
	s.mu.Lock()
	sn := s.findSnapshotLocked(key)
	var d snapshotJSON
	if sn != nil {
		d = s.snapshotDTOLocked(sn)
	}
	s.mu.Unlock()
	if sn == nil {
		s.apiError(w, r, http.StatusNotFound, fmt.Sprintf("Snapshot with ID or name %s not found", key))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// handleDeleteSnapshot takes only a UUID (ParseUUIDPipe in the real API).
func (s *Server) handleDeleteSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		s.apiError(w, r, http.StatusBadRequest, "Validation failed (uuid is expected)")
		return
	}
	s.mu.Lock()
	sn := s.snapshots[id]
	switch {
	case sn == nil:
		s.refuseLocked(w, r, http.StatusNotFound, fmt.Sprintf("Snapshot with ID %s not found", id))
		return
	case sn.general:
		s.refuseLocked(w, r, http.StatusForbidden, "Cannot delete a general snapshot")
		return
	}
	delete(s.snapshots, id)
	dir := sn.filesDir
	s.mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(filepath.Dir(dir))
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleListSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, limit := 1, 100
	if v := q.Get("page"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 {
			page = n
		}
	}
	if v := q.Get("limit"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= 200 {
			limit = n
		}
	}
	name := strings.ToLower(q.Get("name"))
	s.mu.Lock()
	var all []snapshotJSON
	for _, sn := range s.snapshots {
		if name != "" && !strings.Contains(strings.ToLower(sn.name), name) {
			continue
		}
		if src := q.Get("sourceSandboxId"); src != "" && (sn.sourceSandboxID == nil || *sn.sourceSandboxID != src) {
			continue
		}
		all = append(all, s.snapshotDTOLocked(sn))
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	total := len(all)
	start := min((page-1)*limit, total)
	end := min(start+limit, total)
	items := all[start:end]
	if items == nil {
		items = []snapshotJSON{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"items": items, "total": total, "page": page, "totalPages": (total + limit - 1) / limit,
	})
}

// handleCreateSnapshot registers an image snapshot: pending, then active after
// one step. Nothing is pulled; sandboxes from it start with an empty home.
func (s *Server) handleCreateSnapshot(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name      string `json:"name"`
		ImageName string `json:"imageName"`
		CPU       *int   `json:"cpu"`
		GPU       *int   `json:"gpu"`
		Memory    *int   `json:"memory"`
		Disk      *int   `json:"disk"`
	}
	if !s.decodeJSON(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		s.apiError(w, r, http.StatusBadRequest, "name should not be empty")
		return
	}
	if strings.HasSuffix(req.ImageName, ":latest") {
		s.apiError(w, r, http.StatusBadRequest, "Images with tag latest are not allowed")
		return
	}
	s.mu.Lock()
	if s.findSnapshotLocked(req.Name) != nil {
		s.refuseLocked(w, r, http.StatusConflict, fmt.Sprintf("Snapshot with name %s already exists", req.Name))
		return
	}
	now := s.nowLocked()
	sn := &snapshot{
		id: uuid.NewString(), name: req.Name, imageName: req.ImageName, state: snapshotPending,
		cpu: intOr(req.CPU, 1), gpu: intOr(req.GPU, 0), mem: intOr(req.Memory, 1), disk: intOr(req.Disk, 3),
		createdAt: now, updatedAt: now,
	}
	s.snapshots[sn.id] = sn
	s.activateLaterLocked(sn)
	d := s.snapshotDTOLocked(sn)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, d)
}

// activateLaterLocked makes sn active after one step.
func (s *Server) activateLaterLocked(sn *snapshot) {
	s.afterStepLocked(func() {
		sn.state = snapshotActive
		sn.updatedAt = s.nowLocked()
	})
}

// handleSandboxSnapshot captures a sandbox's home into a new snapshot, as
// the real API's createSnapshotFromSandbox and its job handler do: the
// sandbox must be started or stopped; it reports `snapshotting` while the
// runner works (one step, or a SnapshotFault's Hold), then returns to its
// state, and only then does the snapshot row appear, already active. The
// name is not checked up front: when it is taken by the time the job ends,
// the real handler's insert fails and no snapshot is created, silently.
// Sandboxes created from the snapshot start with a copy of those files.
func (s *Server) handleSandboxSnapshot(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if !s.decodeJSON(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		s.apiError(w, r, http.StatusBadRequest, "name should not be empty")
		return
	}
	s.mu.Lock()
	switch {
	case sb.errored() || (sb.state != stateStarted && sb.state != stateStopped):
		s.refuseLocked(w, r, http.StatusBadRequest, "Sandbox must be in started or stopped state to create a snapshot")
		return
	case sb.inTransition():
		s.refuseLocked(w, r, http.StatusConflict, msgInTransit)
		return
	}
	fault := s.takeSnapshotFaultLocked(sb.id)
	now := s.nowLocked()
	src := sb.id
	prev, desired := sb.state, sb.desired
	sn := &snapshot{
		id: uuid.NewString(), name: req.Name, imageName: "emulator/snapshot:" + req.Name, state: snapshotActive,
		cpu: sb.cpu, gpu: sb.gpu, mem: sb.memory, disk: sb.disk, createdAt: now, updatedAt: now,
		sourceSandboxID: &src,
	}
	sn.filesDir = filepath.Join(s.root, "snapshots", sn.id, "home")
	s.setStateLocked(sb, stateSnapshotting, desired)
	sb.gen++ // a step scheduled before (none can be: the sandbox was settled) must not land now
	gen := sb.gen
	s.mu.Unlock()

	// Copy off the lock; the sandbox reports snapshotting meanwhile, so other
	// lifecycle calls answer 409.
	var copyErr error
	if fault.Outcome == SnapshotSucceeds {
		copyErr = copyTree(sb.home, sn.filesDir)
	}
	discard := func() { _ = os.RemoveAll(filepath.Dir(sn.filesDir)) }

	s.mu.Lock()
	if copyErr != nil {
		if sb.gen == gen && sb.state == stateSnapshotting {
			s.setStateLocked(sb, prev, desired)
		}
		s.mu.Unlock()
		discard()
		s.log.Error().Err(copyErr).Msg("snapshot copy")
		s.apiError(w, r, http.StatusInternalServerError, "An unexpected error occurred.")
		return
	}
	finish := func() {
		if sb.removed || sb.gen != gen || sb.state != stateSnapshotting {
			s.goLocked(discard)
			return
		}
		switch fault.Outcome {
		case SnapshotSandboxErrors:
			reason := fault.Reason
			sb.errorReason, sb.recoverable = &reason, false
			s.setStateLocked(sb, stateError, desired)
			s.goLocked(discard)
			return
		case SnapshotJobFails:
			s.setStateLocked(sb, prev, desired)
			s.goLocked(discard)
			return
		}
		s.setStateLocked(sb, prev, desired)
		if s.findSnapshotLocked(sn.name) != nil {
			s.log.Warn().Str("snapshot", sn.name).Msg("snapshot name taken when the job ended; no snapshot created")
			s.goLocked(discard)
			return
		}
		at := s.nowLocked()
		sn.createdAt, sn.updatedAt, sn.lastUsedAt = at, at, &at
		s.snapshots[sn.id] = sn
	}
	switch {
	case fault.Until != nil:
		s.goLocked(func() {
			select {
			case <-fault.Until:
			case <-s.ctx.Done():
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.closed {
				finish()
			}
		})
	case fault.Hold > 0:
		s.afterLocked(fault.Hold, finish)
	default:
		s.afterStepLocked(finish)
	}
	d := s.sandboxDTOLocked(sb, baseURL(r))
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, d)
}
