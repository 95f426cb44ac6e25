package emulator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/coder/websocket"
	"github.com/creack/pty"
)

const (
	ptyReadLimit  = 64 << 10 // per input message, like the daemon's SetReadLimit
	ptyQueueSize  = 256      // output messages buffered per client before "slow consumer"
	ptyReadBuffer = 32 << 10 // bytes per output frame at most
)

// ptySession is a real pseudo-terminal running an interactive login shell.
// Output is broadcast to every attached WebSocket; the process exit becomes a
// close frame whose reason is JSON {"exitCode":N[,"exitReason":"…"]}.
type ptySession struct {
	id        string
	sb        *sandbox
	cwd       string
	envs      map[string]string
	createdAt time.Time
	lazy      bool

	// Guarded by Server.mu.
	cols, rows uint16
	started    bool
	exited     bool
	killed     bool
	cmd        *exec.Cmd
	ptmx       *os.File
	p          *proc
	clients    map[*ptyClient]struct{}
}

type ptyExit struct {
	code   websocket.StatusCode
	reason string // JSON
	status int
	why    string
}

type ptyClient struct {
	conn        *websocket.Conn
	out         *wsWriter
	exitControl bool
	queue       chan []byte
	exit        chan ptyExit // buffered 1: how the session ended
	kicked      chan struct{}
}

// exitReason names an exit status like the daemon does.
func exitReason(code int) string {
	switch {
	case code == 0:
		return ""
	case code == 130:
		return "Ctrl+C"
	case code == 137:
		return "SIGKILL"
	case code == 143:
		return "SIGTERM"
	case code > 128:
		return fmt.Sprintf("signal %d", code-128)
	default:
		return "non-zero exit"
	}
}

func newPtyExit(code int) ptyExit {
	e := ptyExit{status: code, why: exitReason(code), code: websocket.StatusNormalClosure}
	body := map[string]any{"exitCode": code}
	if code != 0 {
		e.code = websocket.StatusInternalError
		body["exitReason"] = e.why
	}
	b, _ := json.Marshal(body)
	e.reason = string(b)
	return e
}

func (pt *ptySession) infoLocked() ptyInfoJSON {
	envs := maps.Clone(pt.envs)
	if envs == nil {
		envs = map[string]string{}
	}
	return ptyInfoJSON{
		ID: pt.id, Cwd: pt.cwd, Envs: envs, Cols: pt.cols, Rows: pt.rows,
		CreatedAt: pt.createdAt.UTC().Format(time.RFC3339), Active: pt.started && !pt.exited && !pt.killed,
		LazyStart: pt.lazy,
	}
}

type ptyCreate struct {
	ID        string            `json:"id"`
	Cwd       string            `json:"cwd"`
	Envs      map[string]string `json:"envs"`
	Cols      *int              `json:"cols"`
	Rows      *int              `json:"rows"`
	LazyStart bool              `json:"lazyStart"`
}

// newPtyLocked validates a create request and registers the session; it
// starts the shell unless lazy. It returns an HTTP status and message on failure.
func (s *Server) newPtyLocked(sb *sandbox, req ptyCreate) (*ptySession, int, string) {
	if strings.TrimSpace(req.ID) == "" {
		return nil, http.StatusBadRequest, "session ID is required"
	}
	cols, rows := intOr(req.Cols, 80), intOr(req.Rows, 24)
	if cols < 1 || cols > 1000 || rows < 1 || rows > 1000 {
		return nil, http.StatusBadRequest, "cols and rows must be between 1 and 1000"
	}
	if sb.ptys[req.ID] != nil {
		return nil, http.StatusConflict, fmt.Sprintf("PTY session with ID '%s' already exists", req.ID)
	}
	envs := maps.Clone(req.Envs)
	if envs == nil {
		envs = map[string]string{}
	}
	if _, ok := envs["TERM"]; !ok {
		envs["TERM"] = "xterm-256color"
	}
	pt := &ptySession{
		id: req.ID, sb: sb, cwd: resolvePath(sb, req.Cwd), envs: envs, createdAt: s.nowLocked(),
		lazy: req.LazyStart, cols: uint16(cols), rows: uint16(rows), clients: map[*ptyClient]struct{}{},
	}
	if !pt.lazy {
		if err := s.startPtyLocked(pt); err != nil {
			s.log.Warn().Err(err).Str("pty", pt.id).Msg("start PTY")
			return nil, http.StatusInternalServerError, "failed to start PTY session"
		}
	}
	sb.ptys[pt.id] = pt
	s.ptyIDs = append(s.ptyIDs, pt.id)
	return pt, 0, ""
}

// startPtyLocked spawns `<shell> -i -l` on a new pseudo-terminal, in its own
// session, and the goroutine that pumps its output and reports its exit.
func (s *Server) startPtyLocked(pt *ptySession) error {
	cmd := exec.Command(s.shell, "-i", "-l")
	cmd.Dir = pt.cwd
	cmd.Env = s.processEnvLocked(pt.sb, pt.envs)
	attrs := &syscall.SysProcAttr{Setsid: true, Setctty: true}
	cmd.SysProcAttr = attrs
	var ptmx *os.File
	p, err := s.startProcLocked(pt.sb, cmd, func() error {
		f, err := pty.StartWithAttrs(cmd, &pty.Winsize{Cols: pt.cols, Rows: pt.rows}, attrs)
		if err != nil {
			return err
		}
		ptmx, err = pollable(f)
		if err != nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
		return err
	}, true)
	if err != nil {
		return err
	}
	pt.cmd, pt.ptmx, pt.p, pt.started = cmd, ptmx, p, true
	s.goLocked(func() { s.ptyLoop(pt) })
	return nil
}

// ptyLoop broadcasts output until the terminal hangs up, then reports the exit.
func (s *Server) ptyLoop(pt *ptySession) {
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, ptyReadBuffer)
		for {
			n, err := pt.ptmx.Read(buf)
			if n > 0 {
				s.broadcastPty(pt, append([]byte(nil), buf[:n]...))
			}
			if err != nil {
				return
			}
		}
	}()
	<-pt.p.exited
	status := pt.p.status
	// The supervisor kills what the shell left in its session (hangup), so the
	// reader sees EIO after draining. If something outside still holds the
	// terminal, closing our (pollable) master unblocks the read.
	t := time.NewTimer(2 * time.Second)
	select {
	case <-readDone:
	case <-t.C:
	case <-s.ctx.Done():
	}
	t.Stop()
	pt.ptmx.Close()
	<-readDone
	s.mu.Lock()
	defer s.mu.Unlock()
	if pt.killed {
		return // clients were told SIGKILL already
	}
	pt.exited = true
	if pt.sb.ptys[pt.id] == pt {
		delete(pt.sb.ptys, pt.id)
	}
	e := newPtyExit(status)
	for c := range pt.clients {
		c.exit <- e
		delete(pt.clients, c)
	}
}

// broadcastPty queues output for every client; a client whose queue is full
// is dropped with 1008 "slow consumer", as the daemon does.
func (s *Server) broadcastPty(pt *ptySession, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range pt.clients {
		select {
		case c.queue <- b:
		default:
			delete(pt.clients, c)
			close(c.kicked)
		}
	}
}

// killPtyLocked kills the shell; attached clients get close 1011
// {"exitCode":137,"exitReason":"SIGKILL"}.
func (s *Server) killPtyLocked(pt *ptySession) {
	if pt.killed || pt.exited {
		return
	}
	pt.killed = true
	e := newPtyExit(137)
	for c := range pt.clients {
		c.exit <- e
		delete(pt.clients, c)
	}
	if pt.started {
		s.killLocked(pt.p)
	}
}

func (s *Server) handleCreatePty(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req ptyCreate
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody)).Decode(&req); err != nil {
		ptyError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	s.mu.Lock()
	pt, status, msg := s.newPtyLocked(sb, req)
	s.mu.Unlock()
	if pt == nil {
		ptyError(w, status, msg)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"sessionId": pt.id})
}

func (s *Server) handleListPty(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	out := []ptyInfoJSON{}
	for _, pt := range sb.ptys {
		out = append(out, pt.infoLocked())
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

func (s *Server) handleGetPty(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	pt := sb.ptys[r.PathValue("sessionId")]
	var info ptyInfoJSON
	if pt != nil {
		info = pt.infoLocked()
	}
	s.mu.Unlock()
	if pt == nil {
		ptyError(w, http.StatusNotFound, "PTY session not found")
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleDeletePty(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	pt := sb.ptys[r.PathValue("sessionId")]
	if pt != nil {
		delete(sb.ptys, pt.id)
		s.killPtyLocked(pt)
	}
	s.mu.Unlock()
	if pt == nil {
		ptyError(w, http.StatusNotFound, "PTY session not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "PTY session deleted"})
}

// handleResizePty resizes via REST (there is no in-band resize); a dead or
// unknown session is 410.
func (s *Server) handleResizePty(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Cols *int `json:"cols"`
		Rows *int `json:"rows"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody)).Decode(&req); err != nil {
		ptyError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if req.Cols == nil || req.Rows == nil || *req.Cols < 1 || *req.Cols > 1000 || *req.Rows < 1 || *req.Rows > 1000 {
		ptyError(w, http.StatusBadRequest, "cols and rows are required and must be between 1 and 1000")
		return
	}
	s.mu.Lock()
	pt := sb.ptys[r.PathValue("sessionId")]
	if pt == nil || pt.exited || pt.killed {
		s.mu.Unlock()
		ptyError(w, http.StatusGone, "PTY session not found or terminated")
		return
	}
	pt.cols, pt.rows = uint16(*req.Cols), uint16(*req.Rows)
	if pt.started {
		if err := setWinsize(pt.ptmx, pt.cols, pt.rows); err != nil {
			s.log.Warn().Err(err).Str("pty", pt.id).Msg("resize")
		}
	}
	info := pt.infoLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handlePtyConnect(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	s.mu.Lock()
	pt := sb.ptys[r.PathValue("sessionId")]
	s.mu.Unlock()
	s.servePty(w, r, sb, pt, r.PathValue("sessionId"))
}

// handlePtyCreateConnect is the SDK's single round trip: create a lazy PTY
// from the query (id, cols, rows, cwd) and the X-Daytona-Pty-Envs~<base64url
// JSON> subprotocol, then attach.
func (s *Server) handlePtyCreateConnect(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	q := r.URL.Query()
	req := ptyCreate{ID: q.Get("id"), Cwd: q.Get("cwd"), LazyStart: true}
	for key, dst := range map[string]**int{"cols": &req.Cols, "rows": &req.Rows} {
		if v := q.Get(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				ptyError(w, http.StatusBadRequest, key+" must be an integer")
				return
			}
			*dst = &n
		}
	}
	for _, p := range offeredSubprotocols(r) {
		if enc, ok := strings.CutPrefix(p, subprotoEnvsPrefix); ok {
			raw, err := base64.RawURLEncoding.DecodeString(enc)
			if err != nil || json.Unmarshal(raw, &req.Envs) != nil {
				ptyError(w, http.StatusBadRequest, "invalid envs subprotocol")
				return
			}
		}
	}
	s.mu.Lock()
	pt, status, msg := s.newPtyLocked(sb, req)
	s.mu.Unlock()
	if pt == nil {
		ptyError(w, status, msg)
		return
	}
	s.servePty(w, r, sb, pt, req.ID)
}

// servePty attaches one WebSocket client: text control "connected" first,
// then binary output; every incoming frame is written to the terminal.
func (s *Server) servePty(w http.ResponseWriter, r *http.Request, sb *sandbox, pt *ptySession, id string) {
	release, ok := s.hold()
	if !ok {
		ptyError(w, http.StatusServiceUnavailable, "emulator is shutting down")
		return
	}
	defer release()
	conn, batch, err := s.acceptWS(w, r)
	if err != nil {
		return
	}
	conn.SetReadLimit(ptyReadLimit)
	c := &ptyClient{
		conn: conn, out: s.newWSWriter(r, conn, batch), exitControl: conn.Subprotocol() == subprotoExitControl,
		queue: make(chan []byte, ptyQueueSize), exit: make(chan ptyExit, 1), kicked: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	fail := func(msg string) {
		b, _ := json.Marshal(map[string]string{"type": "control", "status": "error", "error": msg})
		_ = c.out.write(ctx, websocket.MessageText, b)
		_ = conn.CloseNow() // the daemon drops the connection without a close frame
	}
	s.mu.Lock()
	if pt == nil || pt.exited || pt.killed || sb.ptys[pt.id] != pt {
		s.mu.Unlock()
		fail(fmt.Sprintf("Failed to connect to PTY session: PTY session %s not found", id))
		return
	}
	// Attached before it hears "connected", as with the daemon: a kill or
	// an exit right after the client was told it is connected reaches it
	// (its output waits in the queue until the writer starts).
	pt.clients[c] = struct{}{}
	if !pt.started {
		if err := s.startPtyLocked(pt); err != nil {
			delete(pt.clients, c)
			delete(sb.ptys, pt.id)
			pt.exited = true
			s.mu.Unlock()
			fail("Failed to connect to PTY session: failed to start PTY session")
			return
		}
	}
	ptmx, hook := pt.ptmx, s.afterPtyConnected
	s.mu.Unlock()
	if err := c.out.write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"connected"}`)); err != nil {
		s.mu.Lock()
		delete(pt.clients, c)
		s.mu.Unlock()
		_ = conn.CloseNow()
		return
	}
	if hook != nil {
		hook(sb.id, pt.id)
	}

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer cancel()
		s.ptyWriter(ctx, c)
	}()
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			break
		}
		if _, err := ptmx.Write(data); err != nil {
			break
		}
	}
	s.mu.Lock()
	delete(pt.clients, c)
	s.mu.Unlock()
	cancel()
	<-writerDone
	_ = conn.CloseNow()
}

// ptyWriter sends queued output, then the exit: an "exited" control message
// when the client negotiated X-Daytona-Pty-Exit-Control, and the close frame.
func (s *Server) ptyWriter(ctx context.Context, c *ptyClient) {
	for {
		select {
		case b := <-c.queue:
			if err := c.out.write(ctx, websocket.MessageBinary, b); err != nil {
				if errors.Is(err, errDropped) {
					return
				}
				_ = c.conn.CloseNow()
				return
			}
		case e := <-c.exit:
			for {
				select {
				case b := <-c.queue:
					if c.out.write(ctx, websocket.MessageBinary, b) != nil {
						return
					}
					continue
				default:
				}
				break
			}
			if c.exitControl {
				msg := map[string]any{"type": "control", "status": "exited", "exitCode": e.status}
				if e.why != "" {
					msg["exitReason"] = e.why
				}
				b, _ := json.Marshal(msg)
				if c.out.write(ctx, websocket.MessageText, b) != nil {
					return
				}
			}
			_ = c.conn.Close(e.code, e.reason)
			return
		case <-c.kicked:
			_ = c.conn.Close(websocket.StatusPolicyViolation, "slow consumer")
			return
		case <-ctx.Done():
			_ = c.conn.CloseNow()
			return
		}
	}
}

// pollable returns a non-blocking, poller-registered duplicate of the PTY
// master and closes the original. creack/pty leaves the master in blocking
// mode (it calls Fd), and a blocking read cannot be interrupted by Close.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	var nfd uintptr
	var errno syscall.Errno
	cerr := withRawFd(f, func(fd uintptr) {
		nfd, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
	})
	if cerr != nil {
		return nil, cerr
	}
	if errno != 0 {
		return nil, fmt.Errorf("dup PTY master: %w", errno)
	}
	if err := syscall.SetNonblock(int(nfd), true); err != nil {
		syscall.Close(int(nfd))
		return nil, fmt.Errorf("set PTY master non-blocking: %w", err)
	}
	return os.NewFile(nfd, "/dev/ptmx"), nil
}

func withRawFd(f *os.File, fn func(fd uintptr)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(fn)
}

// setWinsize is TIOCSWINSZ without pty.Setsize, which would put the master
// back into blocking mode.
func setWinsize(f *os.File, cols, rows uint16) error {
	ws := struct{ Row, Col, X, Y uint16 }{Row: rows, Col: cols}
	var errno syscall.Errno
	err := withRawFd(f, func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&ws)))
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
