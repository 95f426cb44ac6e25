package pty

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/paperclipai/daytona-worker/daytona"
)

// The reference plugin's errors, used as the message verbatim.
var (
	// ErrDescriptorRejected: a login command key outside the closed set, or
	// a session home of the wrong shape.
	ErrDescriptorRejected = errors.New("LOGIN_PTY_DESCRIPTOR_REJECTED")
	// ErrHomeRejected: the command creating the session home failed.
	ErrHomeRejected = errors.New("LOGIN_PTY_HOME_REJECTED")
)

// loginCommands is the closed map from a login command key to the command
// it runs; nothing else can be launched on a login PTY.
var loginCommands = map[string]string{
	"claude": "claude setup-token",
	"codex":  "codex login --device-auth",
	"grok":   "grok login --device-auth",
}

// homeVariables names the variable that points each CLI at the session home.
var homeVariables = map[string]string{
	"codex": "CODEX_HOME",
	"grok":  "GROK_HOME",
}

// sessionHomePattern is the only shape of session home the host mints: a
// fixed root and one lowercase UUID, so it needs no quoting to be safe.
var sessionHomePattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^/tmp/paperclip-adapter-login/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
})

// loginProfilePreamble sources the login profiles the way a login shell
// would, each failing open, so a command run outside a login shell sees the
// same PATH as the PTY's login shell.
var loginProfilePreamble = strings.Join([]string{
	`if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi`,
	`if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi`,
	`if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi`,
	`if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi`,
}, " && ")

// ValidateLogin checks a login command key and session home before any
// sandbox call.
func ValidateLogin(commandKey, sessionHome string) error {
	if _, ok := loginCommands[commandKey]; !ok || !sessionHomePattern().MatchString(sessionHome) {
		return ErrDescriptorRejected
	}
	return nil
}

// posixQuote makes s one single-quoted POSIX shell word; a quote inside
// closes the word, is escaped with a backslash, and reopens it.
func posixQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LaunchLine is the line typed into a login PTY's shell (without the
// Enter): exec replaces the shell, so the PTY's exit is the CLI's.
func LaunchLine(commandKey, sessionHome string) string {
	command := loginCommands[commandKey]
	if v, ok := homeVariables[commandKey]; ok {
		return "exec env " + v + "=" + posixQuote(sessionHome) + " " + command
	}
	return "exec " + command
}

// HomeCommand is the one command that creates a session home, after the
// login profiles (an existing home is fine).
func HomeCommand(sessionHome string) string {
	return loginProfilePreamble + " && mkdir -p " + posixQuote(sessionHome)
}

// LoginRequest opens a login PTY.
type LoginRequest struct {
	HostRouteID     string
	ProviderLeaseID string // the lease the PTY lives on (closed with it)
	CommandKey      string // claude, codex or grok
	SessionHome     string // /tmp/paperclip-adapter-login/<uuid>
}

// OpenLogin creates the session home, opens a 120×30 PTY on tb's sandbox
// and launches the login command. The session emits nothing until Start.
func (m *Manager) OpenLogin(ctx context.Context, tb *daytona.Toolbox, req LoginRequest) (*Opening, error) {
	if err := ValidateLogin(req.CommandKey, req.SessionHome); err != nil {
		return nil, err
	}
	s, err := m.register(true, req.HostRouteID, req.ProviderLeaseID)
	if err != nil {
		return nil, err
	}
	return m.open(ctx, s, func(ctx context.Context) error {
		res, err := tb.Execute(ctx, daytona.ExecuteRequest{Command: HomeCommand(req.SessionHome)})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return ErrHomeRejected
		}
		term, err := openTerminal(ctx, tb, s.ptyID, s.out)
		if err != nil {
			return err
		}
		if !s.setTerm(term) {
			return errClosedWhileOpening
		}
		return term.send(ctx, []byte(LaunchLine(req.CommandKey, req.SessionHome)+"\r"))
	})
}

// LoginInput writes text to a login PTY, in order with earlier input.
func (m *Manager) LoginInput(ctx context.Context, sessionID string, data []byte) error {
	s, err := m.loginSession(sessionID)
	if err != nil {
		return err
	}
	if s == nil {
		return loginEnded(sessionID)
	}
	return s.input(ctx, data)
}

// LoginStop kills a login PTY's process; its exit follows as usual. A
// session already closed is stopped already.
func (m *Manager) LoginStop(ctx context.Context, sessionID string) error {
	s, err := m.loginSession(sessionID)
	if err != nil || s == nil {
		return err
	}
	return s.stop(ctx)
}

// LoginClose closes the login PTY of a route, if any, killing its process
// in the background; the route is acknowledged whatever it held.
func (m *Manager) LoginClose(hostRouteID string) {
	m.mu.Lock()
	s := m.logins[hostRouteID]
	if s != nil {
		m.forgetLocked(s)
	} else if _, known := m.closedRoutes.get(hostRouteID); !known {
		// Closed before its open was handled: the open must not go live.
		m.closedRoutes.put(hostRouteID, "")
	}
	shut := m.shut
	m.mu.Unlock()
	if s != nil && !shut {
		// Once Close has begun it has silenced every session and is
		// ending it; the close only has to be acknowledged.
		s.silence()
	}
}

// loginSession finds a live login session by id; nil without error when it
// was closed.
func (m *Manager) loginSession(sessionID string) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.loginIDs[sessionID]; s != nil {
		return s, nil
	}
	if _, ok := m.closedLogins.get(sessionID); ok {
		return nil, nil
	}
	return nil, fmt.Errorf("Daytona login pseudo-terminal: session %q is %w", sessionID, ErrNotOpen)
}

func loginEnded(sessionID string) error {
	return fmt.Errorf("Daytona login pseudo-terminal: session %q %w; the input was not written", sessionID, ErrEnded)
}
