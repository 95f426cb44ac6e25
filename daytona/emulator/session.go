package emulator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

var (
	stdoutMarker = []byte{1, 1, 1}
	stderrMarker = []byte{2, 2, 2}
)

// session is a persistent shell, as in the daemon: each command is written to
// a file and sourced in the shell, so cd, export and functions persist. The
// command's stdout and stderr go through FIFOs to labelers that write each line
// to the command's log prefixed with a 3-byte marker (\x01\x01\x01 stdout,
// \x02\x02\x02 stderr). After the command, the shell reports "<cmdId> <status>"
// on fd 3, a pipe only the emulator reads.
type session struct {
	id    string
	sb    *sandbox
	dir   string
	cmd   *exec.Cmd
	p     *proc
	stdin *os.File // the shell's command channel
	ctl   *os.File // read end of fd 3

	writeMu sync.Mutex // serialises writes to stdin

	// Guarded by Server.mu.
	commands []*sessCmd
	byID     map[string]*sessCmd
	exited   bool // the shell is gone
	deleted  bool
	done     chan struct{} // closed once the shell has exited and been reaped
}

// sessCmd is one command run in a session.
type sessCmd struct {
	id, command string
	dir         string
	logPath     string
	async       bool
	suppress    bool // suppressInputEcho

	// Guarded by Server.mu.
	exitCode *int
	done     chan struct{} // closed once exitCode is set
	// exitDelay holds the exit code back that long after the command ended
	// (an ExitCodeDelay fault); ended is set meanwhile: the output is
	// complete, so followed logs close, but the exit code reads null.
	exitDelay time.Duration
	ended     bool

	logMu  sync.Mutex
	log    *os.File
	notify chan struct{} // closed and replaced on every log append; guarded by logMu

	readers  []*os.File // FIFO read ends, owned by the labelers
	holders  []*os.File // our own write ends, so readers see EOF only after the command
	input    *os.File   // async stdin FIFO, held open for /input
	labelers sync.WaitGroup
	finished bool // guarded by Server.mu: finishCommand ran
}

// appendLog writes one labelled chunk and wakes followers.
func (c *sessCmd) appendLog(marker, data []byte) {
	buf := make([]byte, 0, len(marker)+len(data))
	c.writeLog(append(append(buf, marker...), data...))
}

// writeLog appends labelled lines to the log and wakes the followers.
func (c *sessCmd) writeLog(labelled []byte) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	_, _ = c.log.Write(labelled)
	close(c.notify)
	c.notify = make(chan struct{})
}

// wake tells followers to look again (exit code set, session gone).
func (c *sessCmd) wake() {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	close(c.notify)
	c.notify = make(chan struct{})
}

func (c *sessCmd) waitChan() <-chan struct{} {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	return c.notify
}

// label copies one stream into the log line by line. Lines longer than the
// buffer are written in pieces, each with the marker, so a concurrent line of
// the other stream can never capture the rest. A last line without newline
// gets one, as the daemon's `printf '%s\n'` does.
func (c *sessCmd) label(r io.Reader, marker []byte) {
	defer c.labelers.Done()
	br := bufio.NewReaderSize(r, 64<<10)
	midLine := false
	// The lines already read are labelled and written together: one
	// write per line made a command printing short lines spend nearly all
	// its time in the emulator's system calls.
	var batch []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			batch = append(append(batch, marker...), chunk...)
			midLine = chunk[len(chunk)-1] != '\n'
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			c.writeLog(batch)
			batch = batch[:0]
			continue
		}
		if err != nil {
			break
		}
		if len(batch) < 64<<10 {
			// Another whole line already buffered joins the batch; a
			// partial one would make ReadSlice wait.
			if next, _ := br.Peek(br.Buffered()); bytes.IndexByte(next, '\n') >= 0 {
				continue
			}
		}
		c.writeLog(batch)
		batch = batch[:0]
	}
	if len(batch) > 0 {
		c.writeLog(batch)
	}
	if midLine {
		c.appendLog(marker, []byte{'\n'})
	}
}

func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if !s.decodeToolboxJSON(w, r, &req) {
		return
	}
	switch {
	case strings.TrimSpace(req.SessionID) == "":
		s.toolboxError(w, r, http.StatusBadRequest, "bad request: sessionId is required")
		return
	case req.SessionID == "entrypoint":
		s.toolboxError(w, r, http.StatusBadRequest, "bad request: session ID 'entrypoint' is reserved")
		return
	}
	s.mu.Lock()
	if sb.sessions[req.SessionID] != nil {
		s.mu.Unlock()
		s.toolboxError(w, r, http.StatusConflict, "conflict: session already exists")
		return
	}
	se, err := s.startSessionLocked(sb, req.SessionID)
	if err == nil {
		sb.sessions[se.id] = se
	}
	s.mu.Unlock()
	if err != nil {
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to create session: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// startSessionLocked starts the session shell and its fd-3 reader.
func (s *Server) startSessionLocked(sb *sandbox, id string) (*session, error) {
	dir := filepath.Join(sb.daemonDir, "sessions", url.PathEscape(id)+"-"+uuid.NewString()[:8])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(s.shell)
	cmd.Dir = sb.workDir
	cmd.Env = s.processEnvLocked(sb, nil)
	cmd.Stdin = inR
	cmd.ExtraFiles = []*os.File{ctlW}
	p, err := s.startProcLocked(sb, cmd, nil, false)
	inR.Close()
	ctlW.Close()
	if err != nil {
		inW.Close()
		ctlR.Close()
		return nil, err
	}
	se := &session{
		id: id, sb: sb, dir: dir, cmd: cmd, p: p, stdin: inW, ctl: ctlR,
		byID: map[string]*sessCmd{}, done: make(chan struct{}),
	}
	s.goLocked(func() { s.sessionLoop(se) })
	return se, nil
}

// sessionLoop reads "<cmdId> <status>" reports until the shell is gone, then
// reaps it and releases every command still waiting.
func (s *Server) sessionLoop(se *session) {
	sc := bufio.NewScanner(se.ctl)
	for sc.Scan() {
		id, codeStr, ok := strings.Cut(sc.Text(), " ")
		code, err := strconv.Atoi(codeStr)
		if !ok || err != nil {
			continue
		}
		s.mu.Lock()
		c := se.byID[id]
		s.mu.Unlock()
		if c != nil {
			s.finishCommand(c, code)
		}
	}
	<-se.p.exited
	status := se.p.status
	se.ctl.Close()
	se.stdin.Close()
	s.mu.Lock()
	se.exited = true
	var pending []*sessCmd
	for _, c := range se.commands {
		if !c.finished {
			pending = append(pending, c)
		}
	}
	s.mu.Unlock()
	for _, c := range pending {
		// A command that ended the shell itself (`exit 3`) gets the shell's
		// status; commands of a deleted session keep none, as on the daemon.
		s.mu.Lock()
		deleted := se.deleted
		s.mu.Unlock()
		if deleted {
			s.releaseCommand(c)
			continue
		}
		s.finishCommand(c, status)
	}
	close(se.done)
}

// finishCommand closes the command's input and our FIFO write ends, lets the
// labelers drain (bounded: a background child may keep the pipes open), then
// publishes the exit code, at once or after the command's exitDelay.
func (s *Server) finishCommand(c *sessCmd, code int) {
	s.mu.Lock()
	if c.finished {
		s.mu.Unlock()
		return
	}
	c.finished = true
	s.mu.Unlock()
	for _, h := range c.holders {
		h.Close()
	}
	if c.input != nil {
		c.input.Close()
	}
	drained := make(chan struct{})
	go func() {
		c.labelers.Wait()
		close(drained)
	}()
	t := time.NewTimer(time.Second)
	select {
	case <-drained:
	case <-t.C:
	case <-s.ctx.Done():
	}
	t.Stop()
	s.mu.Lock()
	delay := c.exitDelay
	if s.closed {
		delay = 0 // nothing is left to wait for it
	}
	if delay > 0 {
		c.ended = true
		due, stop := s.timerLocked(delay)
		s.goLocked(func() {
			defer stop()
			select {
			case <-due:
			case <-s.ctx.Done():
			}
			s.publishExit(c, code)
		})
	}
	s.mu.Unlock()
	if delay > 0 {
		c.wake() // the output is complete: followed logs end
		return
	}
	s.publishExit(c, code)
}

// publishExit makes the command's exit code visible and wakes its followers.
func (s *Server) publishExit(c *sessCmd, code int) {
	_ = os.WriteFile(filepath.Join(c.dir, "exit_code"), []byte(strconv.Itoa(code)), 0o644)
	s.mu.Lock()
	c.exitCode = &code
	close(c.done)
	s.mu.Unlock()
	c.wake()
}

// releaseCommand frees a command that will never finish (its session died).
func (s *Server) releaseCommand(c *sessCmd) {
	s.mu.Lock()
	c.finished = true
	s.mu.Unlock()
	for _, f := range append(append(c.holders, c.readers...), c.input) {
		if f != nil {
			f.Close()
		}
	}
	c.wake()
}

// killSessionLocked ends the session shell's process group. The labelers'
// FIFO readers are closed so no goroutine waits on an escaped child.
func (s *Server) killSessionLocked(se *session) {
	if se.deleted {
		return
	}
	se.deleted = true
	s.killLocked(se.p)
	for _, c := range se.commands {
		for _, f := range c.readers {
			f.Close()
		}
		c.wake()
	}
}

func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	out := []sessionJSON{}
	for _, se := range sb.sessions {
		out = append(out, sessionDTOLocked(se))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func sessionDTOLocked(se *session) sessionJSON {
	d := sessionJSON{SessionID: se.id, Commands: []commandJSON{}}
	for _, c := range se.commands {
		d.Commands = append(d.Commands, commandJSON{ID: c.id, Command: c.command, ExitCode: c.exitCode})
	}
	return d
}

// sessionFor resolves {sessionId} or answers 404.
func (s *Server) sessionFor(w http.ResponseWriter, r *http.Request, sb *sandbox) *session {
	s.mu.Lock()
	se := sb.sessions[r.PathValue("sessionId")]
	s.mu.Unlock()
	if se == nil {
		s.toolboxError(w, r, http.StatusNotFound, "not found: session not found")
	}
	return se
}

func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	se := s.sessionFor(w, r, sb)
	if se == nil {
		return
	}
	s.mu.Lock()
	d := sessionDTOLocked(se)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, d)
}

// The entrypoint session exists on every sandbox; the emulator runs no
// entrypoint, so it has no commands and empty logs.
func (s *Server) handleEntrypointSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	writeJSON(w, http.StatusOK, sessionJSON{SessionID: "entrypoint", Commands: []commandJSON{}})
}

func (s *Server) handleEntrypointLogs(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if requestOutputMode(r) == outputSplit {
		writeJSON(w, http.StatusOK, map[string]string{"output": "", "stdout": "", "stderr": ""})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	se := s.sessionFor(w, r, sb)
	if se == nil {
		return
	}
	s.mu.Lock()
	delete(sb.sessions, se.id)
	s.killSessionLocked(se)
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// handleSessionExec runs a command in the session shell: 200 with the output
// when synchronous (no server-side timeout, like the daemon), 202 {cmdId} when
// runAsync. An unknown session is a 500, as the daemon wraps the not-found.
func (s *Server) handleSessionExec(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Command           string `json:"command"`
		RunAsync          bool   `json:"runAsync"`
		Async             bool   `json:"async"`
		SuppressInputEcho bool   `json:"suppressInputEcho"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil || json.Unmarshal(body, &req) != nil || strings.TrimSpace(req.Command) == "" {
		bareStatus(w, http.StatusBadRequest)
		return
	}
	async := req.RunAsync || req.Async
	s.mu.Lock()
	se := sb.sessions[r.PathValue("sessionId")]
	if se == nil {
		s.mu.Unlock()
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to execute command: not found: session not found")
		return
	}
	if se.exited || se.deleted {
		s.mu.Unlock()
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to execute command: session shell has exited")
		return
	}
	c, err := s.newCommandLocked(se, req.Command, async, req.SuppressInputEcho)
	if f := appliedFault(r); err == nil && f != nil {
		c.exitDelay = f.ExitCodeDelay
	}
	s.mu.Unlock()
	if err != nil {
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to execute command: "+err.Error())
		return
	}
	stdin := "/dev/null"
	if async {
		stdin = filepath.Join(c.dir, "in")
	}
	line := fmt.Sprintf("{ . %s; } 3>&- <%s >%s 2>%s; printf '%%s %%s\\n' %s \"$?\" >&3\n",
		shellQuote(filepath.Join(c.dir, "cmd.sh")), shellQuote(stdin),
		shellQuote(filepath.Join(c.dir, "out")), shellQuote(filepath.Join(c.dir, "err")), shellQuote(c.id))
	se.writeMu.Lock()
	_, err = io.WriteString(se.stdin, line)
	se.writeMu.Unlock()
	if err != nil {
		s.releaseCommand(c)
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to execute command: "+err.Error())
		return
	}
	if async {
		writeJSON(w, http.StatusAccepted, sessionExecJSON{CmdID: c.id})
		return
	}
	release, ok := s.hold()
	if !ok {
		return
	}
	defer release()
	select {
	case <-c.done:
	case <-se.done:
	case <-r.Context().Done():
		return
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	code := c.exitCode
	s.mu.Unlock()
	raw, _ := os.ReadFile(c.logPath)
	resp := sessionExecJSON{CmdID: c.id, ExitCode: code}
	switch requestOutputMode(r) {
	case outputSplit:
		so, se := demux(raw)
		out, stdout, stderr := string(raw), string(so), string(se)
		resp.Output, resp.Stdout, resp.Stderr = &out, &stdout, &stderr
	case outputRaw:
		out := string(raw)
		resp.Output = &out
	default:
		out := string(stripMarkers(raw))
		resp.Output = &out
	}
	writeJSON(w, http.StatusOK, resp)
}

// newCommandLocked prepares a command's folder, FIFOs, log and labelers.
func (s *Server) newCommandLocked(se *session, command string, async, suppress bool) (*sessCmd, error) {
	c := &sessCmd{
		id: uuid.NewString(), command: command, async: async, suppress: suppress,
		done: make(chan struct{}), notify: make(chan struct{}),
	}
	c.dir = filepath.Join(se.dir, c.id)
	c.logPath = filepath.Join(c.dir, "output.log")
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cmd.sh"), []byte(command+"\n"), 0o644); err != nil {
		return nil, err
	}
	var err error
	if c.log, err = os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	cleanup := func() {
		for _, f := range append(append([]*os.File{c.log, c.input}, c.readers...), c.holders...) {
			if f != nil {
				f.Close()
			}
		}
	}
	for _, name := range []string{"out", "err"} {
		path := filepath.Join(c.dir, name)
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			cleanup()
			return nil, fmt.Errorf("mkfifo: %w", err)
		}
		// Non-blocking opens: the reader first (the poller lets Close unblock
		// it), then our own writer so the reader sees EOF only when we let go.
		rd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			cleanup()
			return nil, err
		}
		c.readers = append(c.readers, rd)
		hw, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			cleanup()
			return nil, err
		}
		c.holders = append(c.holders, hw)
	}
	if async {
		path := filepath.Join(c.dir, "in")
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			cleanup()
			return nil, fmt.Errorf("mkfifo: %w", err)
		}
		// O_RDWR never blocks on a FIFO; the command sees EOF when we close it.
		if c.input, err = os.OpenFile(path, os.O_RDWR|syscall.O_NONBLOCK, 0); err != nil {
			cleanup()
			return nil, err
		}
	}
	c.labelers.Add(2)
	rOut, rErr := c.readers[0], c.readers[1]
	if !s.goLocked(func() { c.label(rOut, stdoutMarker) }) {
		cleanup()
		return nil, ErrClosed
	}
	s.goLocked(func() { c.label(rErr, stderrMarker) })
	// Followers read the log by path; our handle lives as long as the labelers.
	s.goLocked(func() {
		c.labelers.Wait()
		c.logMu.Lock()
		c.log.Close()
		c.logMu.Unlock()
	})
	se.commands = append(se.commands, c)
	se.byID[c.id] = c
	return c, nil
}

// commandFor resolves {sessionId} and {commandId} or answers 404.
func (s *Server) commandFor(w http.ResponseWriter, r *http.Request, sb *sandbox) (*session, *sessCmd) {
	se := s.sessionFor(w, r, sb)
	if se == nil {
		return nil, nil
	}
	s.mu.Lock()
	c := se.byID[r.PathValue("commandId")]
	s.mu.Unlock()
	if c == nil {
		s.toolboxError(w, r, http.StatusNotFound, "not found: command not found")
		return nil, nil
	}
	return se, c
}

func (s *Server) handleGetCommand(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	_, c := s.commandFor(w, r, sb)
	if c == nil {
		return
	}
	s.mu.Lock()
	d := commandJSON{ID: c.id, Command: c.command, ExitCode: c.exitCode}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, d)
}

// handleCommandInput writes to a running async command's stdin (a newline is
// added if missing) and echoes it to the log as stdout unless suppressed.
func (s *Server) handleCommandInput(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	_, c := s.commandFor(w, r, sb)
	if c == nil {
		return
	}
	var req struct {
		Data string `json:"data"`
	}
	if !s.decodeToolboxJSON(w, r, &req) {
		return
	}
	s.mu.Lock()
	finished := c.finished || c.exitCode != nil
	s.mu.Unlock()
	if finished || c.input == nil {
		s.toolboxError(w, r, http.StatusGone, "gone: command has already completed")
		return
	}
	data := req.Data
	if !strings.HasSuffix(data, "\n") {
		data += "\n"
	}
	// Echo first: the input precedes whatever output it causes.
	if !c.suppress {
		c.appendLog(stdoutMarker, []byte(data))
	}
	if _, err := io.WriteString(c.input, data); err != nil {
		s.toolboxError(w, r, http.StatusGone, "gone: command has already completed")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// demux splits marker-labelled bytes into stdout and stderr. Bytes before the
// first marker are dropped, as the SDK demuxers do. The next position of each
// marker is remembered between steps: searching afresh for a marker that
// never comes (a command without stderr) would rescan the whole log at every
// line, quadratic in the output.
func demux(raw []byte) (stdout, stderr []byte) {
	var cur *[]byte
	base := 0                  // raw[base:] is what is left
	nextOut, nextErr := -2, -2 // absolute positions; -2 unknown, -1 none left
	find := func(next *int, marker []byte) int {
		if *next == -1 || *next >= base {
			return *next
		}
		if i := bytes.Index(raw[base:], marker); i >= 0 {
			*next = base + i
		} else {
			*next = -1
		}
		return *next
	}
	for base < len(raw) {
		o, e := find(&nextOut, stdoutMarker), find(&nextErr, stderrMarker)
		i := o
		if i < 0 || (e >= 0 && e < i) {
			i = e
		}
		if i < 0 {
			if cur != nil {
				*cur = append(*cur, raw[base:]...)
			}
			break
		}
		if cur != nil {
			*cur = append(*cur, raw[base:i]...)
		}
		if raw[i] == 1 {
			cur = &stdout
		} else {
			cur = &stderr
		}
		base = i + 3
	}
	return stdout, stderr
}

func stripMarkers(raw []byte) []byte {
	out := bytes.ReplaceAll(raw, stdoutMarker, nil)
	return bytes.ReplaceAll(out, stderrMarker, nil)
}
