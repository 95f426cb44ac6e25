package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Session is a long-lived shell in the sandbox; cd, export and functions
// persist between its commands.
type Session struct {
	SessionID string    `json:"sessionId"`
	Commands  []Command `json:"commands"`
}

// Command is a command run in a session. ExitCode is nil while it runs.
type Command struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// SessionExecRequest runs a command in a session.
type SessionExecRequest struct {
	Command string
	// Async returns as soon as the command started (with its ID) instead of
	// when it finished; its stdin then stays open for SendSessionInput.
	Async bool
	// SuppressInputEcho keeps SendSessionInput data out of the logs.
	SuppressInputEcho bool
	// Timeout bounds the HTTP call on the client side (the daemon has no
	// exec timeout; the command keeps running). Zero: only ctx bounds it.
	Timeout time.Duration
}

// SessionExecResponse is the answer to SessionExec. For an async command
// only CmdID is set. Output keeps the raw stream markers; Stdout and Stderr
// are split (empty when the daemon does not split).
type SessionExecResponse struct {
	CmdID    string
	Output   string
	Stdout   string
	Stderr   string
	ExitCode *int
}

// SessionLogs is a snapshot of a command's logs.
type SessionLogs struct {
	// Output is the raw log with stream markers.
	Output string
	Stdout string
	Stderr string
}

// CreateSession creates a session with the caller's ID (409 if it exists).
func (t *Toolbox) CreateSession(ctx context.Context, sessionID string) error {
	if sessionID == "" {
		return errors.New("daytona: session: empty session ID")
	}
	return t.send(ctx, http.MethodPost, map[string]string{"sessionId": sessionID}, nil, "process", "session")
}

// GetSession fetches a session and its commands.
func (t *Toolbox) GetSession(ctx context.Context, sessionID string) (*Session, error) {
	if sessionID == "" {
		return nil, errors.New("daytona: session: empty session ID")
	}
	var s Session
	if err := t.get(ctx, &s, "process", "session", sessionID); err != nil {
		return nil, err
	}
	return &s, nil
}

// ListSessions lists the sandbox's sessions.
func (t *Toolbox) ListSessions(ctx context.Context) ([]Session, error) {
	var out []Session
	if err := t.get(ctx, &out, "process", "session"); err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSession kills a session's processes and removes it.
func (t *Toolbox) DeleteSession(ctx context.Context, sessionID string) error {
	if sessionID == "" {
		return errors.New("daytona: session: empty session ID")
	}
	return t.send(ctx, http.MethodDelete, nil, nil, "process", "session", sessionID)
}

// SessionExec runs a command in a session. A synchronous call blocks until
// the command ends (there is no server-side timeout: bound it with ctx).
// Executing in an unknown session fails with a 500 whose message says
// "session not found" (the daemon's behaviour).
func (t *Toolbox) SessionExec(ctx context.Context, sessionID string, req SessionExecRequest) (*SessionExecResponse, error) {
	if sessionID == "" {
		return nil, errors.New("daytona: session exec: empty session ID")
	}
	if strings.TrimSpace(req.Command) == "" {
		return nil, errors.New("daytona: session exec: empty command")
	}
	body := map[string]any{"command": req.Command}
	if req.Async {
		// runAsync is current; async is the legacy alias older daemons read.
		body["runAsync"] = true
		body["async"] = true
	}
	if req.SuppressInputEcho {
		body["suppressInputEcho"] = true
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	var out struct {
		CmdID    string  `json:"cmdId"`
		Output   *string `json:"output"`
		Stdout   *string `json:"stdout"`
		Stderr   *string `json:"stderr"`
		ExitCode *int    `json:"exitCode"`
	}
	send := t.send
	if !req.Async {
		// A synchronous exec answers when the command ends: no queue slot.
		send = t.sendUntilDone
	}
	if err := send(ctx, http.MethodPost, body, &out, "process", "session", sessionID, "exec"); err != nil {
		return nil, err
	}
	return &SessionExecResponse{
		CmdID:    out.CmdID,
		Output:   deref(out.Output),
		Stdout:   deref(out.Stdout),
		Stderr:   deref(out.Stderr),
		ExitCode: out.ExitCode,
	}, nil
}

// GetSessionCommand fetches a command; ExitCode is nil while it runs.
func (t *Toolbox) GetSessionCommand(ctx context.Context, sessionID, commandID string) (*Command, error) {
	if sessionID == "" || commandID == "" {
		return nil, errors.New("daytona: session command: empty session or command ID")
	}
	var cmd Command
	if err := t.get(ctx, &cmd, "process", "session", sessionID, "command", commandID); err != nil {
		return nil, err
	}
	return &cmd, nil
}

// SessionCommandLogs fetches the logs a command produced so far. Daemons
// answer JSON to SDK versions >= 0.167.0 and plain text (with markers) to
// older ones; both are accepted and split.
func (t *Toolbox) SessionCommandLogs(ctx context.Context, sessionID, commandID string) (*SessionLogs, error) {
	if sessionID == "" || commandID == "" {
		return nil, errors.New("daytona: session logs: empty session or command ID")
	}
	u, err := t.endpoint(ctx, "process", "session", sessionID, "command", commandID, "logs")
	if err != nil {
		return nil, err
	}
	r := &request{method: http.MethodGet, url: u}
	resp, err := t.c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	defer drainClose(resp.Body)
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody))
	if err != nil {
		return nil, t.c.bodyError(ctx, r, err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var out struct {
			Output *string `json:"output"`
			Stdout *string `json:"stdout"`
			Stderr *string `json:"stderr"`
		}
		if err := json.Unmarshal(data, &out); err != nil {
			return nil, fmt.Errorf("daytona: session logs: decode response: %w", err)
		}
		logs := &SessionLogs{Output: deref(out.Output), Stdout: deref(out.Stdout), Stderr: deref(out.Stderr)}
		if out.Stdout == nil && out.Stderr == nil && logs.Output != "" {
			logs.Stdout, logs.Stderr = splitOutput(logs.Output)
		}
		return logs, nil
	}
	logs := &SessionLogs{Output: string(data)}
	logs.Stdout, logs.Stderr = splitOutput(logs.Output)
	return logs, nil
}

// SendSessionInput writes data (a newline is appended by the daemon if
// missing) to the stdin of an async command. A finished command answers 410
// (ErrGone).
func (t *Toolbox) SendSessionInput(ctx context.Context, sessionID, commandID, data string) error {
	if sessionID == "" || commandID == "" {
		return errors.New("daytona: session input: empty session or command ID")
	}
	return t.send(ctx, http.MethodPost, map[string]string{"data": data}, nil, "process", "session", sessionID, "command", commandID, "input")
}

// splitOutput demultiplexes a complete marker-delimited log.
func splitOutput(raw string) (stdout, stderr string) {
	var o, e bytes.Buffer
	d := NewDemuxer(&o, &e)
	_, _ = d.Write([]byte(raw))
	_ = d.Flush()
	return o.String(), e.String()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
