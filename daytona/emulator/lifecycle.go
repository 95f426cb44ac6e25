package emulator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

const (
	daemonVersion  = "0.218.0-emulator"
	runnerID       = "emulator-runner"
	sandboxClass   = "container"
	defaultUser    = "daytona"
	serverWaitMax  = 30 * time.Second // the real controller's wait for `started`
	maxJSONBody    = 8 << 20
	msgInTransit   = "Sandbox state change in progress"
	msgErrored     = "Sandbox is in an errored state"
	msgNotIntParam = "Validation failed (numeric string is expected)"
)

// sandboxDTOLocked renders the full Sandbox JSON; base is the request's
// scheme://host, used for toolboxProxyUrl.
func (s *Server) sandboxDTOLocked(sb *sandbox, base string) sandboxJSON {
	d := sandboxJSON{
		ID:                  sb.id,
		OrganizationID:      s.opts.organizationID(),
		Name:                sb.name,
		Snapshot:            sb.snapshotName,
		User:                sb.user,
		Env:                 maps.Clone(sb.env),
		Labels:              maps.Clone(sb.labels),
		Public:              sb.public,
		NetworkBlockAll:     sb.netBlockAll,
		NetworkAllowList:    sb.netAllowList,
		DomainAllowList:     sb.domAllowList,
		Target:              sb.target,
		CPU:                 sb.cpu,
		GPU:                 sb.gpu,
		Memory:              sb.memory,
		Disk:                sb.disk,
		State:               sb.reportedState(),
		DesiredState:        sb.desired,
		ErrorReason:         sb.errorReason,
		Recoverable:         sb.recoverable,
		BackupState:         "None",
		AutoStopInterval:    sb.autoStop,
		AutoPauseInterval:   sb.autoPause,
		AutoArchiveInterval: sb.autoArchive,
		AutoDeleteInterval:  sb.autoDelete,
		Volumes:             append([]volumeJSON{}, sb.volumes...),
		BuildInfo:           sb.build,
		CreatedAt:           isoTime(sb.createdAt),
		UpdatedAt:           isoTime(sb.updatedAt),
		LastActivityAt:      isoTime(sb.lastActivityAt),
		SandboxClass:        sandboxClass,
		DaemonVersion:       daemonVersion,
		RunnerID:            runnerID,
		ToolboxProxyURL:     base + "/toolbox",
	}
	if d.Env == nil {
		d.Env = map[string]string{}
	}
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if sb.autoDestroyAt != nil {
		d.AutoDestroyAt = isoTime(*sb.autoDestroyAt)
	}
	return d
}

func (s *Server) listItemLocked(sb *sandbox, base string) sandboxListItemJSON {
	d := s.sandboxDTOLocked(sb, base)
	return sandboxListItemJSON{
		ID: d.ID, OrganizationID: d.OrganizationID, Name: d.Name, Target: d.Target,
		RunnerID: d.RunnerID, SandboxClass: d.SandboxClass, State: d.State, DesiredState: d.DesiredState,
		Snapshot: d.Snapshot, User: d.User, ErrorReason: d.ErrorReason, Recoverable: d.Recoverable,
		Public: d.Public, NetworkBlockAll: d.NetworkBlockAll, NetworkAllowList: d.NetworkAllowList,
		DomainAllowList: d.DomainAllowList, CPU: d.CPU, GPU: d.GPU, Memory: d.Memory, Disk: d.Disk,
		Labels: d.Labels, BackupState: d.BackupState, AutoStopInterval: d.AutoStopInterval,
		AutoPauseInterval: d.AutoPauseInterval, AutoArchiveInterval: d.AutoArchiveInterval,
		AutoDeleteInterval: d.AutoDeleteInterval, AutoDestroyAt: d.AutoDestroyAt,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, LastActivityAt: d.LastActivityAt,
		DaemonVersion: d.DaemonVersion, ToolboxProxyURL: d.ToolboxProxyURL,
	}
}

// replySandbox answers status with the sandbox's current DTO.
func (s *Server) replySandbox(w http.ResponseWriter, r *http.Request, status int, sb *sandbox) {
	s.mu.Lock()
	d := s.sandboxDTOLocked(sb, baseURL(r))
	s.mu.Unlock()
	writeJSON(w, status, d)
}

// decodeJSON reads a bounded JSON body; on failure it answers 400 in the
// control plane's shape and reports false.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		s.apiError(w, r, http.StatusBadRequest, "Cannot read request body")
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		s.apiError(w, r, http.StatusBadRequest, "Invalid JSON body: "+err.Error())
		return false
	}
	return true
}

// lookup resolves {idOrName} (or {sandboxId}) or answers 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *sandbox {
	key := r.PathValue("idOrName")
	if key == "" {
		key = r.PathValue("sandboxId")
	}
	s.mu.Lock()
	sb := s.findLocked(key)
	s.mu.Unlock()
	if sb == nil {
		s.apiError(w, r, http.StatusNotFound, fmt.Sprintf("Sandbox with ID or name %s not found", key))
	}
	return sb
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req createSandboxJSON
	if !s.decodeJSON(w, r, &req) {
		return
	}
	hasResources := req.CPU != nil || req.GPU != nil || req.Memory != nil || req.Disk != nil
	switch {
	case req.BuildInfo != nil && req.Snapshot != "":
		s.apiError(w, r, http.StatusBadRequest, "Cannot specify a snapshot when using a build info entry")
		return
	case req.BuildInfo == nil && hasResources:
		s.apiError(w, r, http.StatusBadRequest, "Cannot specify Sandbox resources when using a snapshot")
		return
	case req.BuildInfo != nil && strings.TrimSpace(req.BuildInfo.DockerfileContent) == "":
		s.apiError(w, r, http.StatusBadRequest, "buildInfo.dockerfileContent should not be empty")
		return
	}
	for name, v := range map[string]*int{"autoStopInterval": req.AutoStopInterval, "autoArchiveInterval": req.AutoArchiveInterval,
		"autoPauseInterval": req.AutoPauseInterval, "ttlMinutes": req.TTLMinutes} {
		if v != nil && *v < 0 {
			s.apiError(w, r, http.StatusBadRequest, name+" must not be less than 0")
			return
		}
	}

	s.mu.Lock()
	now := s.nowLocked()
	if req.Name != "" && s.nameTakenLocked(req.Name) {
		s.refuseLocked(w, r, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", req.Name))
		return
	}
	sb := &sandbox{
		id:          uuid.NewString(),
		name:        req.Name,
		user:        req.User,
		target:      req.Target,
		env:         maps.Clone(req.Env),
		labels:      maps.Clone(req.Labels),
		public:      req.Public,
		netBlockAll: req.NetworkBlockAll,
		volumes:     req.Volumes,
		autoStop:    intOr(req.AutoStopInterval, 15),
		autoPause:   intOr(req.AutoPauseInterval, 0),
		autoArchive: intOr(req.AutoArchiveInterval, 10080),
		autoDelete:  intOr(req.AutoDeleteInterval, -1),
		createdAt:   now, updatedAt: now, lastActivityAt: now,
		changed:    make(chan struct{}),
		sessions:   map[string]*session{},
		ptys:       map[string]*ptySession{},
		procs:      map[*proc]struct{}{},
		external:   map[string]bool{},
		previewTok: token(32),
	}
	sb.netAllowList, sb.domAllowList = req.NetworkAllowList, req.DomainAllowList
	if sb.name == "" {
		sb.name = sb.id
	}
	if sb.user == "" {
		sb.user = defaultUser
	}
	if sb.target == "" {
		sb.target = s.opts.target()
	}
	sb.autoArchive = clampArchive(sb.autoArchive)
	if req.TTLMinutes != nil && *req.TTLMinutes > 0 {
		t := now.Add(time.Duration(*req.TTLMinutes) * time.Minute)
		sb.autoDestroyAt = &t
	}
	var snap *snapshot
	if req.BuildInfo == nil {
		name := req.Snapshot
		if name == "" {
			name = s.opts.defaultSnapshot()
		}
		snap = s.findSnapshotLocked(name)
		if snap == nil {
			s.mu.Unlock()
			s.apiError(w, r, http.StatusBadRequest,
				fmt.Sprintf("Snapshot %s not found. Did you add it through the Daytona Dashboard?", name))
			return
		}
		if snap.state != snapshotActive {
			s.refuseLocked(w, r, http.StatusBadRequest, fmt.Sprintf("Snapshot %s is not active (state %s)", name, snap.state))
			return
		}
		sb.snapshotName = snap.name
		sb.cpu, sb.gpu, sb.memory, sb.disk = snap.cpu, snap.gpu, snap.mem, snap.disk
		lu := now
		snap.lastUsedAt = &lu
	} else {
		sb.cpu, sb.gpu, sb.memory, sb.disk = intOr(req.CPU, 2), intOr(req.GPU, 0), intOr(req.Memory, 4), intOr(req.Disk, 10)
		ref := "emulator/build:" + sb.id[:8]
		sb.snapshotName = ref
		sb.build = &buildInfoJSON{
			DockerfileContent: req.BuildInfo.DockerfileContent,
			ContextHashes:     req.BuildInfo.ContextHashes,
			CreatedAt:         isoTime(now), UpdatedAt: isoTime(now), SnapshotRef: ref,
		}
	}
	filesFrom := ""
	if snap != nil {
		filesFrom = snap.filesDir
	}
	s.mu.Unlock()

	// Folders and snapshot files are written off the lock.
	if err := s.newSandboxFolders(sb); err != nil {
		s.log.Error().Err(err).Msg("create sandbox folders")
		s.apiError(w, r, http.StatusInternalServerError, "An unexpected error occurred.")
		return
	}
	if filesFrom != "" {
		if err := copyTree(filesFrom, sb.home); err != nil {
			s.log.Error().Err(err).Str("snapshot", sb.snapshotName).Msg("restore snapshot files")
		}
	}
	s.mu.Lock()
	if s.closed || (req.Name != "" && s.nameTakenLocked(req.Name)) {
		closed := s.closed
		s.mu.Unlock()
		_ = os.RemoveAll(sb.dir)
		if closed {
			s.apiError(w, r, http.StatusServiceUnavailable, "emulator is shutting down")
		} else {
			s.apiError(w, r, http.StatusConflict, fmt.Sprintf("Sandbox with name %s already exists", req.Name))
		}
		return
	}
	s.sandboxes[sb.id] = sb
	if sb.build != nil {
		// Builds never make the controller wait.
		s.setStateLocked(sb, stateBuildingSnapshot, desiredStarted)
		s.stepLocked(sb, func() {
			s.setStateLocked(sb, stateStarting, desiredStarted)
			s.stepLocked(sb, func() { s.setStateLocked(sb, stateStarted, desiredStarted) })
		})
	} else {
		s.setStateLocked(sb, stateUnknown, desiredStarted)
		s.stepLocked(sb, func() { s.setStateLocked(sb, stateStarted, desiredStarted) })
	}
	s.log.Info().Str("sandbox", sb.id).Str("name", sb.name).Msg("created sandbox")
	// The real controller waits for started, then answers the sandbox as
	// it was when created (it drops what its wait returns): a client sees
	// "creating" and polls, as the SDK does.
	created := s.sandboxDTOLocked(sb, baseURL(r))
	s.mu.Unlock()

	if sb.build == nil && !s.opts.ReturnTransitional {
		if !s.waitStarted(w, r, sb) {
			return
		}
	}
	writeJSON(w, http.StatusOK, created)
}

// waitStarted holds the response until sb is started, like the real
// controller (≤30 s). If the sandbox fails instead it answers 400 and reports false.
func (s *Server) waitStarted(w http.ResponseWriter, r *http.Request, sb *sandbox) bool {
	release, ok := s.hold()
	if !ok {
		return true
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), serverWaitMax)
	defer cancel()
	for {
		s.mu.Lock()
		st, removed, ch := sb.reportedState(), sb.removed, sb.changed
		reason := ""
		if sb.errorReason != nil {
			reason = *sb.errorReason
		}
		s.mu.Unlock()
		switch {
		case st == stateStarted || removed:
			return true
		case st == stateError || st == stateBuildFailed:
			s.apiError(w, r, http.StatusBadRequest, "Sandbox failed to start: "+reason)
			return false
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return true
		case <-s.ctx.Done():
			return true
		}
	}
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	if sb := s.lookup(w, r); sb != nil {
		s.replySandbox(w, r, http.StatusOK, sb)
	}
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	// The real API refuses only a pending sandbox; one being archived is not.
	if sb.inTransition() && sb.state != statePendingBuild && !sb.archiving() {
		s.refuseLocked(w, r, http.StatusConflict, msgInTransit)
		return
	}
	s.destroyLocked(sb)
	d := s.sandboxDTOLocked(sb, baseURL(r))
	s.mu.Unlock()
	if d.State == stateDestroyed {
		d.State = stateDestroying // with synchronous steps it is already gone
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	switch {
	case sb.state == stateStarted && sb.desired == desiredStarted:
		s.mu.Unlock()
		s.replySandbox(w, r, http.StatusOK, sb)
		return
	case sb.archiving():
		// The real API starts a sandbox that is being archived: the
		// archive is abandoned and the sandbox starts from its runner.
	case s.refuseChangeLocked(w, r, sb):
		return
	case sb.state != stateStopped && sb.state != stateArchived:
		s.refuseLocked(w, r, http.StatusBadRequest, "Sandbox is not in valid state")
		return
	}
	fromArchive := sb.state == stateArchived
	s.startLocked(sb)
	s.mu.Unlock()
	// The real controller skips its wait when restoring from an archive.
	if !fromArchive && !s.opts.ReturnTransitional && !s.waitStarted(w, r, sb) {
		return
	}
	s.replySandbox(w, r, http.StatusOK, sb)
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	switch {
	case s.refuseChangeLocked(w, r, sb):
		return
	case sb.state != stateStarted:
		s.refuseLocked(w, r, http.StatusBadRequest, "Sandbox is not in a stoppable state")
		return
	}
	if sb.autoDelete == 0 {
		// Ephemeral sandboxes are deleted instead of stopped.
		s.destroyLocked(sb)
	} else {
		s.stopLocked(sb)
	}
	d := s.sandboxDTOLocked(sb, baseURL(r))
	s.mu.Unlock()
	if d.State == stateDestroyed {
		d.State = stateDestroying
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) handleArchive(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	switch {
	case s.refuseChangeLocked(w, r, sb):
		return
	case sb.state != stateStopped:
		s.refuseLocked(w, r, http.StatusBadRequest, "Sandbox is not stopped")
		return
	case sb.autoDelete == 0:
		s.refuseLocked(w, r, http.StatusBadRequest, "Ephemeral sandboxes cannot be archived")
		return
	}
	s.setStateLocked(sb, stateStopped, desiredArchived)
	s.stepAfterLocked(sb, s.opts.archiveDelay(), func() { s.setStateLocked(sb, stateArchived, desiredArchived) })
	s.mu.Unlock()
	s.replySandbox(w, r, http.StatusOK, sb)
}

func (s *Server) handleRecover(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	if sb.state != stateError || !sb.recoverable {
		s.refuseLocked(w, r, http.StatusBadRequest, "Sandbox is not in a recoverable state")
		return
	}
	sb.errorReason, sb.recoverable = nil, false
	skipStart := r.URL.Query().Get("skipStart") == "true"
	if skipStart {
		s.setStateLocked(sb, stateStopped, desiredStopped)
	} else {
		s.startLocked(sb)
	}
	s.mu.Unlock()
	if !skipStart && !s.opts.ReturnTransitional && !s.waitStarted(w, r, sb) {
		return
	}
	s.replySandbox(w, r, http.StatusOK, sb)
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	started := sb.state == stateStarted && sb.desired == desiredStarted
	s.mu.Unlock()
	if !started {
		s.apiError(w, r, http.StatusBadRequest, "Sandbox must be in started state to pause")
		return
	}
	s.apiError(w, r, http.StatusUnprocessableEntity, "Pausing is not supported for this sandbox")
}

type intervalKind int

const (
	intervalAutoStop intervalKind = iota
	intervalAutoArchive
	intervalAutoDelete
	intervalAutoPause
	intervalTTL
)

// handleInterval serves the auto-stop/archive/delete/pause and TTL POSTs.
// They answer 201, NestJS's default for a POST without @HttpCode.
func (s *Server) handleInterval(kind intervalKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sb := s.lookup(w, r)
		if sb == nil {
			return
		}
		n, err := strconv.Atoi(r.PathValue("interval"))
		if err != nil {
			s.apiError(w, r, http.StatusBadRequest, msgNotIntParam)
			return
		}
		if n < 0 && kind != intervalAutoDelete {
			s.apiError(w, r, http.StatusBadRequest, "Interval must be a non-negative integer")
			return
		}
		s.mu.Lock()
		switch kind {
		case intervalAutoStop:
			sb.autoStop = n
		case intervalAutoArchive:
			sb.autoArchive = clampArchive(n)
		case intervalAutoDelete:
			sb.autoDelete = n
		case intervalAutoPause:
			sb.autoPause = n
		case intervalTTL:
			if n == 0 {
				sb.autoDestroyAt = nil
			} else {
				t := s.nowLocked().Add(time.Duration(n) * time.Minute)
				sb.autoDestroyAt = &t
			}
		}
		sb.updatedAt = s.nowLocked()
		s.mu.Unlock()
		s.replySandbox(w, r, http.StatusCreated, sb)
	}
}

func clampArchive(n int) int {
	if n == 0 || n > maxAutoArchiveInterval {
		return maxAutoArchiveInterval
	}
	return n
}

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func (s *Server) handleLabels(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	var req struct {
		Labels map[string]string `json:"labels"`
	}
	if !s.decodeJSON(w, r, &req) {
		return
	}
	if req.Labels == nil {
		s.apiError(w, r, http.StatusBadRequest, "labels must be an object")
		return
	}
	s.mu.Lock()
	sb.labels = maps.Clone(req.Labels)
	sb.updatedAt = s.nowLocked()
	out := maps.Clone(sb.labels)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"labels": out})
}

func (s *Server) handlePublic(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	v, err := strconv.ParseBool(r.PathValue("isPublic"))
	if err != nil {
		s.apiError(w, r, http.StatusBadRequest, "Validation failed (boolean string is expected)")
		return
	}
	s.mu.Lock()
	sb.public = v
	sb.updatedAt = s.nowLocked()
	s.mu.Unlock()
	s.replySandbox(w, r, http.StatusCreated, sb)
}

func (s *Server) handleNetworkSettings(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	var req struct {
		NetworkBlockAll  *bool   `json:"networkBlockAll"`
		NetworkAllowList *string `json:"networkAllowList"`
		DomainAllowList  *string `json:"domainAllowList"`
	}
	if !s.decodeJSON(w, r, &req) {
		return
	}
	s.mu.Lock()
	if req.NetworkBlockAll != nil {
		sb.netBlockAll = *req.NetworkBlockAll
	}
	if req.NetworkAllowList != nil {
		sb.netAllowList = req.NetworkAllowList
	}
	if req.DomainAllowList != nil {
		sb.domAllowList = req.DomainAllowList
	}
	sb.updatedAt = s.nowLocked()
	s.mu.Unlock()
	s.replySandbox(w, r, http.StatusOK, sb)
}

func (s *Server) handleLastActivity(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	s.touchLocked(sb)
	s.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) handleToolboxProxyURL(w http.ResponseWriter, r *http.Request) {
	if sb := s.lookup(w, r); sb != nil {
		writeJSON(w, http.StatusOK, map[string]string{"url": baseURL(r) + "/toolbox"})
	}
}

// parsePort validates a {port} path value.
func (s *Server) parsePort(w http.ResponseWriter, r *http.Request) (int, bool) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		s.apiError(w, r, http.StatusBadRequest, msgNotIntParam)
		return 0, false
	}
	if port < 1 || port > 65535 {
		s.apiError(w, r, http.StatusBadRequest, "Invalid port")
		return 0, false
	}
	return port, true
}

func (s *Server) handlePreviewURL(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	port, ok := s.parsePort(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	tok := sb.previewTok
	s.issueSecretLocked(tok)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{
		"sandboxId": sb.id,
		"url":       fmt.Sprintf("https://%d-%s.proxy.emulator.daytona.invalid", port, sb.id),
		"token":     tok,
	})
}

func (s *Server) handleSignedPreviewURL(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	port, ok := s.parsePort(w, r)
	if !ok {
		return
	}
	tok := token(32)
	s.mu.Lock()
	s.issueSecretLocked(tok)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"sandboxId": sb.id,
		"port":      port,
		"token":     tok,
		"url":       fmt.Sprintf("https://%d-%s.proxy.emulator.daytona.invalid", port, tok),
	})
}

func (s *Server) handleBuildLogsURL(w http.ResponseWriter, r *http.Request) {
	if sb := s.lookup(w, r); sb != nil {
		writeJSON(w, http.StatusOK, map[string]string{"url": baseURL(r) + "/api/sandbox/" + sb.id + "/build-logs"})
	}
}

// handleBuildLogs serves a short plain-text build log for image-built sandboxes.
func (s *Server) handleBuildLogs(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	build := sb.build
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if build == nil {
		return
	}
	fmt.Fprintf(w, "emulator: building %s\n", build.SnapshotRef)
	for _, line := range strings.Split(strings.TrimRight(build.DockerfileContent, "\n"), "\n") {
		fmt.Fprintf(w, "emulator: %s\n", line)
	}
	fmt.Fprintln(w, "emulator: build complete")
}

// handleConfig answers the public GET /api/config with the fields clients read.
func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"version":                daemonVersion,
		"oidc":                   map[string]string{"issuer": "", "clientId": "", "audience": ""},
		"linkedAccountsEnabled":  false,
		"announcements":          map[string]any{},
		"proxyTemplateUrl":       "https://{{PORT}}-{{sandboxId}}.proxy.emulator.daytona.invalid",
		"proxyToolboxUrl":        baseURL(r) + "/toolbox",
		"defaultSnapshot":        s.opts.defaultSnapshot(),
		"dashboardUrl":           baseURL(r),
		"maxAutoArchiveInterval": maxAutoArchiveInterval,
		"maintananceMode":        false,
		"environment":            "emulator",
		"sshGatewayCommand":      "ssh {{TOKEN}}@" + sshGatewayHost,
	})
}

// refuseChangeLocked answers the refusals every lifecycle change shares: an
// errored sandbox (400) and one already in a transition (409). It reports
// whether it answered (and released s.mu). s.mu must be held.
func (s *Server) refuseChangeLocked(w http.ResponseWriter, r *http.Request, sb *sandbox) bool {
	switch {
	case sb.errored():
		s.refuseLocked(w, r, http.StatusBadRequest, msgErrored)
	case sb.inTransition():
		s.refuseLocked(w, r, http.StatusConflict, msgInTransit)
	default:
		return false
	}
	return true
}
