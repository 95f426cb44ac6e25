package emulator

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// proc is one process the emulator started for a sandbox: a /process/execute
// shell, a session shell or a PTY shell. Each leads its own session (and so
// its own process group), so a stop, a timeout or Close can kill everything it
// spawned, including job-control groups an interactive shell creates.
//
// Killing by group or session ID is only safe while that ID cannot have been
// reused by an unrelated process. So the leader is not reaped as soon as it
// exits: it stays a zombie (holding its PID) until no process of its session
// is left, and only then is it reaped and forgotten.
type proc struct {
	pid    int
	sb     *sandbox
	cmd    *exec.Cmd
	hangup bool          // PTY: the session dies with its leader
	exited chan struct{} // closed when the leader has exited; status is then set
	status int           // exit code, or 128+signal
	done   chan struct{} // closed once the leader is reaped and its session is empty

	kick    chan struct{} // buffered 1: a kill was sent, look again soon
	reaping bool          // guarded by Server.mu: about to be reaped, never signal it again
}

var errNotRunning = errors.New("sandbox is not running")

// startProcLocked starts cmd in its own session (unless the caller set
// SysProcAttr, as PTYs do), registers it under sb and supervises it. start
// lets PTYs use pty.Start; nil means cmd.Start. s.mu must be held, so a
// concurrent stop cannot miss the new process.
func (s *Server) startProcLocked(sb *sandbox, cmd *exec.Cmd, start func() error, hangup bool) (*proc, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if !sb.reachable() {
		return nil, errNotRunning
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if start == nil {
		start = cmd.Start
	}
	if err := start(); err != nil {
		return nil, err
	}
	p := &proc{
		pid: cmd.Process.Pid, sb: sb, cmd: cmd, hangup: hangup,
		exited: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1),
	}
	sb.procs[p] = struct{}{}
	s.procs[p] = struct{}{}
	s.goLocked(func() { s.supervise(p) })
	return p, nil
}

// supervise waits for the leader to exit without reaping it, publishes its
// status, waits for the rest of its session (background jobs) to end, then
// reaps it. Close kills whatever is left, so this returns promptly then.
func (s *Server) supervise(p *proc) {
	status, err := waitExited(p.pid)
	if err != nil {
		// Could not wait without reaping; fall back to an ordinary wait.
		s.mu.Lock()
		p.reaping = true
		s.mu.Unlock()
		status = exitStatus(p.cmd.Wait())
		p.status = status
		close(p.exited)
		s.forget(p)
		return
	}
	p.status = status
	close(p.exited)
	if p.hangup {
		killTree(p.pid)
	}
	// Background jobs may outlive the shell; look every 250 ms, and often
	// right after a kill so a stopped sandbox is soon free of them.
	poll := 250 * time.Millisecond
	for sessionMembers(p.pid) > 0 {
		select {
		case <-time.After(poll):
		case <-p.kick:
			poll = 5 * time.Millisecond
		case <-s.ctx.Done():
			killTree(p.pid)
			poll = 5 * time.Millisecond
		}
	}
	s.mu.Lock()
	p.reaping = true
	s.mu.Unlock()
	_ = p.cmd.Wait()
	s.forget(p)
}

func (s *Server) forget(p *proc) {
	s.mu.Lock()
	delete(p.sb.procs, p)
	delete(s.procs, p)
	s.mu.Unlock()
	close(p.done)
}

// killLocked SIGKILLs p's group and session unless p is being reaped (its
// session is empty then, and its PID may be reused). s.mu must be held.
func (s *Server) killLocked(p *proc) {
	if p.reaping {
		return
	}
	killTree(p.pid)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// waitExited blocks until pid exits and returns its status, leaving it a
// zombie (waitid with WNOWAIT) so its PID stays reserved.
func waitExited(pid int) (int, error) {
	// siginfo_t: si_signo, si_errno, si_code int32, then (8-aligned) si_pid,
	// si_uid, si_status for SIGCHLD.
	var info [128]byte
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		break
	}
	code := *(*int32)(unsafe.Pointer(&info[8]))
	status := int(*(*int32)(unsafe.Pointer(&info[24])))
	switch code {
	case cldExited:
		return status, nil
	case cldKilled, cldDumped:
		return 128 + status, nil
	default:
		return -1, fmt.Errorf("waitid: unexpected si_code %d", code)
	}
}

const (
	pPID      = 1 // idtype_t P_PID
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// killGroup signals the whole process group led by pid.
func killGroup(pid int, sig syscall.Signal) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(-pid, sig)
}

// killTree SIGKILLs the process group and the whole session led by pid. An
// interactive shell puts each job in its own group, and a job that has not
// taken the terminal yet misses the hangup, so the group alone is not enough.
func killTree(pid int) {
	if pid <= 0 {
		return
	}
	killGroup(pid, syscall.SIGKILL)
	for pass := 0; pass < 3 && killSession(pid) > 0; pass++ {
	}
}

// killSession SIGKILLs every live process whose session ID is sid and
// reports how many it found.
func killSession(sid int) int {
	n := 0
	scanProcs(func(pid, session int) {
		if session == sid {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	})
	return n
}

// sessionMembers counts the live processes of session sid.
func sessionMembers(sid int) int {
	return liveMembers(map[int]bool{sid: true})
}

// liveMembers counts the live (not zombie) processes in the given sessions,
// in one pass over /proc.
func liveMembers(sids map[int]bool) int {
	if len(sids) == 0 {
		return 0
	}
	n := 0
	scanProcs(func(_, session int) {
		if sids[session] {
			n++
		}
	})
	return n
}

// scanProcs calls fn with the PID and session ID of every live process but
// our own.
func scanProcs(fn func(pid, session int)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may contain spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if session, err := strconv.Atoi(f[3]); err == nil {
			fn(pid, session)
		}
	}
}

// killSandboxLocked ends every process of sb: sessions, PTYs (clients get a
// SIGKILL close) and running commands. Files stay.
func (s *Server) killSandboxLocked(sb *sandbox) {
	for id, se := range sb.sessions {
		s.killSessionLocked(se)
		delete(sb.sessions, id)
	}
	for id, pt := range sb.ptys {
		s.killPtyLocked(pt)
		delete(sb.ptys, id)
	}
	sids := map[int]bool{}
	for p := range sb.procs {
		s.killLocked(p)
		sids[p.pid] = true
	}
	// SIGKILL is asynchronous; wait (briefly, bounded) until the processes are
	// really gone, so a sandbox reported stopped or destroyed runs nothing.
	for deadline := time.Now().Add(time.Second); liveMembers(sids) > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// exitStatus turns a Wait error into the shell convention: the exit code, or
// 128+signal for a process killed by a signal.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// processEnvLocked builds a sandbox process's environment: a minimal, clean
// base (the host's PATH and locale only, never its secrets), the sandbox's
// create-time env, POST /env changes, then extra.
func (s *Server) processEnvLocked(sb *sandbox, extra map[string]string) []string {
	env := map[string]string{
		"HOME":                     sb.home,
		"USER":                     sb.user,
		"LOGNAME":                  sb.user,
		"SHELL":                    s.shell,
		"PATH":                     os.Getenv("PATH"),
		"DAYTONA_SANDBOX_ID":       sb.id,
		"DAYTONA_SANDBOX_USER":     sb.user,
		"DAYTONA_SANDBOX_SNAPSHOT": sb.snapshotName,
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	for _, k := range []string{"LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range sb.env {
		env[k] = v
	}
	for k := range sb.daemonUnset {
		delete(env, k)
	}
	for k, v := range sb.daemonEnv {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func checkEnvKeys(envs map[string]string) error {
	for k := range envs {
		if !envKeyRE.MatchString(k) {
			return fmt.Errorf("invalid environment variable name: %q", k)
		}
	}
	return nil
}
