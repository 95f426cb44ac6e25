package emulator

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// proc is one process the emulator started for a sandbox: a /process/execute
// shell, a session shell or a PTY shell. Each leads its own process group so a
// stop, a timeout or Close can kill everything it spawned.
type proc struct {
	pid  int
	sb   *sandbox
	done chan struct{} // closed once the process has been waited for
}

type killReason int

const (
	killReasonStop killReason = iota
	killReasonDestroy
	killReasonShutdown
	killReasonError
)

var errNotRunning = errors.New("sandbox is not running")

// startLocked starts cmd in its own process group (unless the caller set
// Setsid, as PTYs do) and registers it under sb. start lets PTYs use
// pty.Start; nil means cmd.Start. s.mu must be held, so a concurrent stop
// cannot miss the new process.
func (s *Server) startProcLocked(sb *sandbox, cmd *exec.Cmd, start func() error) (*proc, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if !sb.reachable() {
		return nil, errNotRunning
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if start == nil {
		start = cmd.Start
	}
	if err := start(); err != nil {
		return nil, err
	}
	p := &proc{pid: cmd.Process.Pid, sb: sb, done: make(chan struct{})}
	sb.procs[p] = struct{}{}
	s.procs[p] = struct{}{}
	return p, nil
}

// waitProc waits for cmd and unregisters p. Exactly one goroutine calls it
// per process.
func (s *Server) waitProc(p *proc, cmd *exec.Cmd) error {
	err := cmd.Wait()
	s.mu.Lock()
	delete(p.sb.procs, p)
	delete(s.procs, p)
	s.mu.Unlock()
	close(p.done)
	return err
}

// killGroup signals the whole process group led by pid.
func killGroup(pid int, sig syscall.Signal) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(-pid, sig)
}

// killSandboxLocked ends every process of sb: sessions, PTYs (clients get a
// SIGKILL close) and running commands. Files stay.
func (s *Server) killSandboxLocked(sb *sandbox, why killReason) {
	for id, se := range sb.sessions {
		s.killSessionLocked(se)
		delete(sb.sessions, id)
	}
	for id, pt := range sb.ptys {
		s.killPtyLocked(pt)
		delete(sb.ptys, id)
	}
	for p := range sb.procs {
		killGroup(p.pid, syscall.SIGKILL)
	}
	_ = why
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
