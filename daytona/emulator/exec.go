package emulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// decodeToolboxJSON reads a bounded JSON body; on failure it answers the
// daemon's structured 400 and reports false.
func (s *Server) decodeToolboxJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		s.toolboxError(w, r, http.StatusBadRequest, "bad request: invalid request body: "+err.Error())
		return false
	}
	return true
}

// handleExecute runs one command like the daemon: the sandbox shell reads the
// command from stdin, in its own session, stdout and stderr interleaved into
// one result. A non-zero exit is a 200; `timeout` (seconds) kills the session
// and answers 408.
func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		// The daemon's *uint32: seconds beyond it fail the body's decode.
		Timeout uint32 `json:"timeout"`
	}
	if !s.decodeToolboxJSON(w, r, &req) {
		return
	}
	s.journalExecute(sb.id, req.Command, req.Cwd, int(req.Timeout))
	if strings.TrimSpace(req.Command) == "" {
		s.toolboxError(w, r, http.StatusBadRequest, "bad request: command cannot be empty or whitespace-only")
		return
	}
	if err := checkEnvKeys(req.Envs); err != nil {
		s.toolboxError(w, r, http.StatusBadRequest, "bad request: "+err.Error())
		return
	}
	release, ok := s.hold()
	if !ok {
		s.toolboxError(w, r, http.StatusServiceUnavailable, "emulator is shutting down")
		return
	}
	defer release()

	// Our own pipe instead of exec's copier: a background child that keeps the
	// pipe open blocks the reply (as on the real daemon), but a kill can still
	// unblock us by closing the read end.
	pr, pw, err := os.Pipe()
	if err != nil {
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to create pipe: "+err.Error())
		return
	}
	defer pr.Close()
	cmd := exec.Command(s.shell)
	cmd.Dir = resolvePath(sb, req.Cwd)
	cmd.Stdin = strings.NewReader(req.Command)
	cmd.Stdout, cmd.Stderr = pw, pw
	s.mu.Lock()
	cmd.Env = s.processEnvLocked(sb, req.Envs)
	// The timeout runs from before the start, so a clock moved once the
	// command has shown signs of life cannot miss it.
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		due, stop := s.timerLocked(time.Duration(req.Timeout) * time.Second)
		defer stop()
		timeout = due
	}
	p, err := s.startProcLocked(sb, cmd, nil, false)
	s.mu.Unlock()
	pw.Close()
	if err != nil {
		if err == errNotRunning || err == ErrClosed {
			s.toolboxError(w, r, http.StatusBadRequest, "bad request: "+err.Error())
			return
		}
		// The daemon reports a shell that cannot start as exit code -1.
		writeJSON(w, http.StatusOK, map[string]any{"exitCode": -1, "result": err.Error()})
		return
	}

	var out bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(&out, pr)
	}()
	kill := func() {
		s.mu.Lock()
		s.killLocked(p)
		s.mu.Unlock()
	}
	timedOut := func() {
		kill()
		pr.Close()
		<-readDone
		s.toolboxError(w, r, http.StatusRequestTimeout, "request timeout: command execution timeout")
	}

	select {
	case <-p.exited:
		// The shell is done; its output pipe closes once every child that
		// holds it is gone too (as on the daemon, a background job that keeps
		// stdout open holds the reply).
		select {
		case <-readDone:
		case <-timeout:
			timedOut()
			return
		case <-s.ctx.Done():
		}
	case <-timeout:
		timedOut()
		return
	case <-s.ctx.Done():
		kill()
		<-p.exited
	}
	pr.Close()
	<-readDone
	writeJSON(w, http.StatusOK, map[string]any{"exitCode": p.status, "result": out.String()})
}
