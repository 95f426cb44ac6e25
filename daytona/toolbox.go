package daytona

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/internal/js"
)

// Toolbox is a handle on one sandbox's toolbox API (processes, sessions,
// files, PTYs), reached at <toolboxProxyUrl>/<sandboxId>. It is cheap, holds
// no connection and is safe for concurrent use.
type Toolbox struct {
	c         *Client
	sandboxID string

	mu      sync.Mutex
	base    *url.URL // resolved toolbox base; nil until known
	baseErr error    // a malformed toolbox proxy URL given at construction
}

// Toolbox returns the toolbox handle of sb. When sb carries no
// ToolboxProxyURL, the first call asks the control plane for it.
func (c *Client) Toolbox(sb *Sandbox) *Toolbox {
	if sb == nil {
		return c.ToolboxFor("", "")
	}
	return c.ToolboxFor(sb.ID, sb.ToolboxProxyURL)
}

// ToolboxFor returns a toolbox handle from a sandbox ID and its toolbox proxy
// URL (as found in Sandbox.ToolboxProxyURL; "" resolves it on first use).
func (c *Client) ToolboxFor(sandboxID, toolboxProxyURL string) *Toolbox {
	t := &Toolbox{c: c, sandboxID: sandboxID}
	if toolboxProxyURL != "" {
		t.base, t.baseErr = toolboxBase(toolboxProxyURL, sandboxID)
	}
	return t
}

// SandboxID returns the sandbox the handle talks to.
func (t *Toolbox) SandboxID() string { return t.sandboxID }

func toolboxBase(proxyURL, sandboxID string) (*url.URL, error) {
	u, err := parseHTTPURL(proxyURL, "toolbox proxy URL")
	if err != nil {
		return nil, err
	}
	return joinURL(u, sandboxID), nil
}

// endpoint resolves the toolbox base (once) and appends path segments.
func (t *Toolbox) endpoint(ctx context.Context, segments ...string) (*url.URL, error) {
	if err := checkSegment("toolbox", t.sandboxID); err != nil {
		return nil, err
	}
	t.mu.Lock()
	base, baseErr := t.base, t.baseErr
	t.mu.Unlock()
	if baseErr != nil {
		return nil, baseErr
	}
	if base == nil {
		proxy, err := t.c.ToolboxProxyURL(ctx, t.sandboxID)
		if err != nil {
			return nil, err
		}
		if base, err = toolboxBase(proxy, t.sandboxID); err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.base = base
		t.mu.Unlock()
	}
	return joinURL(base, segments...), nil
}

func (t *Toolbox) get(ctx context.Context, out any, segments ...string) error {
	u, err := t.endpoint(ctx, segments...)
	if err != nil {
		return err
	}
	return t.c.getJSON(ctx, u, out)
}

func (t *Toolbox) send(ctx context.Context, method string, in, out any, segments ...string) error {
	u, err := t.endpoint(ctx, segments...)
	if err != nil {
		return err
	}
	return t.c.sendJSON(ctx, method, u, in, out)
}

// sendUntilDone is send for a request answered only when its command ends.
func (t *Toolbox) sendUntilDone(ctx context.Context, method string, in, out any, segments ...string) error {
	u, err := t.endpoint(ctx, segments...)
	if err != nil {
		return err
	}
	return t.c.sendJSONUntilDone(ctx, method, u, in, out)
}

// WorkDir returns the sandbox's working directory (the image WORKDIR, or the
// user's home); relative toolbox paths resolve against it.
func (t *Toolbox) WorkDir(ctx context.Context) (string, error) {
	var out struct {
		Dir string `json:"dir"`
	}
	if err := t.get(ctx, &out, "work-dir"); err != nil {
		return "", err
	}
	return out.Dir, nil
}

// UserHomeDir returns the home directory of the sandbox user.
func (t *Toolbox) UserHomeDir(ctx context.Context) (string, error) {
	var out struct {
		Dir string `json:"dir"`
	}
	if err := t.get(ctx, &out, "user-home-dir"); err != nil {
		return "", err
	}
	return out.Dir, nil
}

// ExecuteRequest runs one shell command (fed to the login shell on stdin, so
// pipes and multi-line scripts work).
type ExecuteRequest struct {
	Command string
	// Cwd defaults to the work dir.
	Cwd string
	Env map[string]string
	// Timeout kills the command's process group after this long (rounded up
	// to whole seconds) and fails the call with a 408 matching ErrTimeout.
	// Zero lets it run until ctx ends.
	Timeout time.Duration
	// TimeoutSeconds, when positive, is sent instead of Timeout: the number
	// of seconds as a JavaScript caller computes it, which may be far beyond
	// what a time.Duration holds (it is sent as JSON.stringify writes it).
	TimeoutSeconds float64
}

// ExecuteResponse is the outcome of Execute. Result holds stdout and stderr
// interleaved. A non-zero exit is not an error.
type ExecuteResponse struct {
	ExitCode int
	Result   string
}

// SecondsDuration converts a number of seconds to a Duration, saturating at
// the largest one instead of overflowing.
func SecondsDuration(secs float64) time.Duration {
	return MillisecondsDuration(secs * 1000)
}

// SaturatingAdd adds two non-negative durations, saturating at the largest
// one instead of overflowing (a timeout of centuries plus a margin).
func SaturatingAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// MillisecondsDuration converts a number of milliseconds to a Duration,
// saturating at the largest one instead of overflowing; NaN and negative
// values are zero.
func MillisecondsDuration(ms float64) time.Duration {
	switch {
	case math.IsNaN(ms) || ms <= 0:
		return 0
	case ms >= float64(math.MaxInt64/int64(time.Millisecond)):
		return math.MaxInt64
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// execTimeoutSlack pads the HTTP deadline over the server-side timeout, as
// the official SDKs do, so the server's 408 arrives before the client gives up.
const execTimeoutSlack = 5 * time.Second

// Execute runs a command with POST /process/execute.
// A blank command is sent too, as the SDK sends it: Daytona's refusal
// (`bad request: command cannot be empty or whitespace-only`) is the error.
func (t *Toolbox) Execute(ctx context.Context, req ExecuteRequest) (*ExecuteResponse, error) {
	body := struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd,omitempty"`
		Envs    map[string]string `json:"envs,omitempty"`
		Timeout json.Number       `json:"timeout,omitempty"`
	}{Command: req.Command, Cwd: req.Cwd, Envs: req.Env}
	secs := req.TimeoutSeconds
	if secs <= 0 && req.Timeout > 0 {
		secs = math.Ceil(req.Timeout.Seconds())
	}
	if secs > 0 && !math.IsInf(secs, 0) {
		// The daemon reads the seconds as a uint32 and refuses the whole
		// body beyond it: a longer timeout is sent as the most it takes,
		// and bounds the command all the same.
		body.Timeout = json.Number(js.FormatNumber(min(secs, math.MaxUint32)))
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, SaturatingAdd(SecondsDuration(secs), execTimeoutSlack))
		defer cancel()
	}
	// Old daemons send "code" instead of "exitCode"; an absent code is 0
	// (the field is omitted when empty).
	var out struct {
		ExitCode *int   `json:"exitCode"`
		Code     *int   `json:"code"`
		Result   string `json:"result"`
	}
	// The answer comes when the command ends: no queue slot (see request.long).
	if err := t.sendUntilDone(ctx, http.MethodPost, body, &out, "process", "execute"); err != nil {
		return nil, err
	}
	resp := &ExecuteResponse{Result: out.Result}
	switch {
	case out.ExitCode != nil:
		resp.ExitCode = *out.ExitCode
	case out.Code != nil:
		resp.ExitCode = *out.Code
	}
	return resp, nil
}
