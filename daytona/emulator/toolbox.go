package emulator

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
)

// toolbox resolves {sandboxId} (an ID, never a name: the proxy routes by ID),
// checks the daemon is reachable, records activity and calls h.
func (s *Server) toolbox(h toolboxHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("sandboxId")
		s.mu.Lock()
		sb := s.sandboxes[id]
		if sb == nil || sb.removed {
			s.mu.Unlock()
			s.toolboxError(w, r, http.StatusNotFound, "not found: sandbox "+id+" not found")
			return
		}
		if !sb.reachable() {
			s.mu.Unlock()
			s.toolboxError(w, r, http.StatusBadRequest,
				"bad request: failed to get runner info: no IP address found. Is the Sandbox started?")
			return
		}
		if !strings.EqualFold(r.Header.Get("X-Daytona-Skip-Last-Activity-Update"), "true") {
			s.touchLocked(sb)
		}
		s.mu.Unlock()
		h(w, r, sb)
	}
}

// resolvePath makes p absolute against the work dir, like the daemon does for
// relative paths. Empty means the work dir itself.
func resolvePath(sb *sandbox, p string) string {
	if p == "" {
		return sb.workDir
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(sb.workDir, p)
	}
	return filepath.Clean(p)
}

func (s *Server) handleWorkDir(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	writeJSON(w, http.StatusOK, map[string]string{"dir": sb.workDir})
}

func (s *Server) handleHomeDir(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	writeJSON(w, http.StatusOK, map[string]string{"dir": sb.home})
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	writeJSON(w, http.StatusOK, map[string]string{"version": daemonVersion})
}

// handleUpdateEnv changes the daemon's environment for processes started later.
func (s *Server) handleUpdateEnv(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Set   map[string]string `json:"set"`
		Unset []string          `json:"unset"`
	}
	if !s.decodeToolboxJSON(w, r, &req) {
		return
	}
	if err := checkEnvKeys(req.Set); err != nil {
		s.toolboxError(w, r, http.StatusBadRequest, "bad request: "+err.Error())
		return
	}
	s.mu.Lock()
	if sb.daemonEnv == nil {
		sb.daemonEnv, sb.daemonUnset = map[string]string{}, map[string]bool{}
	}
	for _, k := range req.Unset {
		delete(sb.daemonEnv, k)
		sb.daemonUnset[k] = true
	}
	for k, v := range req.Set {
		sb.daemonEnv[k] = v
		delete(sb.daemonUnset, k)
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// outputMode is how session output is presented, chosen from
// X-Daytona-SDK-Version (and X-Daytona-Split-Output) like the daemon does.
type outputMode int

const (
	outputCombined outputMode = iota // markers stripped, one stream
	outputRaw                        // raw bytes with markers, text responses
	outputSplit                      // JSON with raw output plus demuxed stdout/stderr
)

func requestOutputMode(r *http.Request) outputMode {
	v := r.Header.Get("X-Daytona-SDK-Version")
	if v == "" {
		// Browsers pass the version as a WebSocket subprotocol.
		for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
			if ver, ok := strings.CutPrefix(strings.TrimSpace(p), "X-Daytona-SDK-Version~"); ok {
				v = ver
			}
		}
	}
	if v == "" {
		if strings.EqualFold(r.Header.Get("X-Daytona-Split-Output"), "true") {
			return outputRaw
		}
		return outputCombined
	}
	switch {
	case strings.Contains(v, "dev") || versionAtLeast(v, 0, 167, 0):
		return outputSplit
	case versionAtLeast(v, 0, 27, 0):
		return outputRaw
	default:
		return outputCombined
	}
}

// versionAtLeast compares a semver-ish "v1.2.3-pre" with major.minor.patch.
// Unparseable versions count as new, which is how the daemon errs.
func versionAtLeast(v string, major, minor, patch int) bool {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	want := []int{major, minor, patch}
	for i := 0; i < 3; i++ {
		n := 0
		if i < len(parts) {
			var err error
			if n, err = strconv.Atoi(parts[i]); err != nil {
				return true
			}
		}
		if n != want[i] {
			return n > want[i]
		}
	}
	return true
}
