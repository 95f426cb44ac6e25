package emulator_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

func TestExecute(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(map[string]any{"env": map[string]string{"FROM_CREATE": "yes"}})["id"].(string)
	home := env.Server.Sandboxes()[0].HomeDir

	tests := []struct {
		name   string
		req    map[string]any
		code   int
		result string
	}{
		{"echo", map[string]any{"command": "echo hello"}, 0, "hello\n"},
		{"exit code is not an HTTP error", map[string]any{"command": "exit 7"}, 7, ""},
		{"stderr is interleaved", map[string]any{"command": "echo a; echo b >&2; echo c"}, 0, "a\nb\nc\n"},
		{"multi-line script from stdin", map[string]any{"command": "x=1\nif [ $x = 1 ]; then\n  echo one\nfi"}, 0, "one\n"},
		{"cwd defaults to the work dir", map[string]any{"command": "pwd"}, 0, home + "\n"},
		{"cwd", map[string]any{"command": "pwd", "cwd": "/tmp"}, 0, "/tmp\n"},
		{"relative cwd", map[string]any{"command": "mkdir -p sub && cd sub && pwd"}, 0, home + "/sub\n"},
		{"HOME is the sandbox home", map[string]any{"command": "echo $HOME"}, 0, home + "\n"},
		{"envs", map[string]any{"command": "echo $A-$B", "envs": map[string]string{"A": "1", "B": "2"}}, 0, "1-2\n"},
		{"create-time env", map[string]any{"command": "echo $FROM_CREATE"}, 0, "yes\n"},
		{"missing cwd is exit -1", map[string]any{"command": "true", "cwd": "/nonexistent/dir"}, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := *c
			cl.t = t
			r := cl.tb(id, "POST", "/process/execute", tt.req)
			require.Equal(t, 200, r.status, "%s", r.body)
			var out struct {
				ExitCode int    `json:"exitCode"`
				Result   string `json:"result"`
			}
			r.json(t, &out)
			assert.Equal(t, tt.code, out.ExitCode)
			if tt.code != -1 {
				assert.Equal(t, tt.result, out.Result)
			} else {
				assert.NotEmpty(t, out.Result)
			}
		})
	}

	for _, tt := range []struct {
		name string
		req  map[string]any
		msg  string
	}{
		{"blank command", map[string]any{"command": "  \n"}, "bad request: command cannot be empty or whitespace-only"},
		{"bad env key", map[string]any{"command": "true", "envs": map[string]string{"1BAD": "x"}}, ""},
	} {
		r := c.tb(id, "POST", "/process/execute", tt.req)
		require.Equal(t, 400, r.status, tt.name)
		body := r.obj(t)
		assert.Equal(t, "BAD_REQUEST", body["code"], tt.name)
		assert.Equal(t, "/process/execute", body["path"], tt.name)
		if tt.msg != "" {
			assert.Equal(t, tt.msg, body["message"])
		}
	}
}

func TestExecuteTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	// The timeout runs on the emulator's clock, which stands still until the
	// background job is running; then it moves past the timeout.
	still := time.Now()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous, ClockTimers: true, Clock: func() time.Time { return still }})
	id := c.create(nil)["id"].(string)
	pidFile := filepath.Join(env.Server.Sandboxes()[0].HomeDir, "bg.pid")
	env.AdvanceWhen(t, func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(b), "\n")
	}, 3*time.Second)
	r := c.tb(id, "POST", "/process/execute", map[string]any{
		"command": "sleep 300 & echo $! > " + pidFile + "; sleep 300",
		"timeout": 3,
	})
	require.Equal(t, http.StatusRequestTimeout, r.status, "%s", r.body)
	body := r.obj(t)
	assert.Equal(t, "REQUEST_TIMEOUT", body["code"])
	assert.Equal(t, "request timeout: command execution timeout", body["message"])
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	waitGone(t, pid)
	require.Eventually(t, func() bool { return env.Server.LiveProcesses() == 0 }, 10*time.Second, 10*time.Millisecond)
}

type execResp struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
	ExitCode *int    `json:"exitCode"`
}

func (c *client) sessionExec(id, sid, command string, async bool) (int, execResp) {
	c.t.Helper()
	r := c.tb(id, "POST", "/process/session/"+sid+"/exec", map[string]any{"command": command, "runAsync": async})
	var out execResp
	if r.status == 200 || r.status == 202 {
		r.json(c.t, &out)
	}
	return r.status, out
}

func TestSessions(t *testing.T) {
	t.Parallel()
	_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)

	require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s1"}).status)
	r := c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s1"})
	require.Equal(t, 409, r.status)
	assert.Equal(t, "conflict: session already exists", r.obj(t)["message"])

	r = c.tb(id, "POST", "/process/session/nope/exec", map[string]any{"command": "true"})
	require.Equal(t, 500, r.status)
	assert.Equal(t, "failed to execute command: not found: session not found", r.obj(t)["message"])

	r = c.tb(id, "POST", "/process/session/s1/exec", map[string]any{"command": " "})
	assert.Equal(t, 400, r.status)
	assert.Empty(t, r.body, "blank command is a bare 400")

	status, out := c.sessionExec(id, "s1", "cd /tmp && export KEEP=me && f() { echo fn; }", false)
	require.Equal(t, 200, status)
	assert.Equal(t, 0, *out.ExitCode)

	status, out = c.sessionExec(id, "s1", "pwd; echo $KEEP; f; (exit 3); echo after-subshell-exit; echo oops >&2", false)
	require.Equal(t, 200, status)
	assert.Equal(t, 0, *out.ExitCode)
	assert.Equal(t, "/tmp\nme\nfn\nafter-subshell-exit\n", *out.Stdout)
	assert.Equal(t, "oops\n", *out.Stderr)
	// Two pipes, two labelers: the order across streams is not defined (nor on
	// the daemon), the order within each is.
	d := &demuxer{}
	d.write([]byte(*out.Output))
	d.close()
	assert.Equal(t, *out.Stdout, d.stdout.String(), "output carries the markers")
	assert.Equal(t, *out.Stderr, d.stderr.String())

	status, out = c.sessionExec(id, "s1", "false", false)
	require.Equal(t, 200, status)
	assert.Equal(t, 1, *out.ExitCode)
	status, out = c.sessionExec(id, "s1", "printf 'no newline'", false)
	require.Equal(t, 200, status)
	assert.Equal(t, "no newline\n", *out.Stdout, "the last partial line gets a newline, as on the daemon")

	// Output formats by X-Daytona-SDK-Version.
	old := *c
	old.sdk = ""
	r = old.tb(id, "POST", "/process/session/s1/exec", map[string]any{"command": "echo x; echo y >&2"})
	var plain execResp
	r.json(t, &plain)
	assert.ElementsMatch(t, []string{"x", "y", ""}, strings.Split(*plain.Output, "\n"), "no version: markers stripped")
	assert.Nil(t, plain.Stdout)
	logs := old.tb(id, "GET", "/process/session/s1/command/"+plain.CmdID+"/logs", nil)
	assert.Equal(t, *plain.Output, string(logs.body))
	mid := *c
	mid.sdk = "v0.100.0"
	logs = mid.tb(id, "GET", "/process/session/s1/command/"+plain.CmdID+"/logs", nil)
	assert.Contains(t, []string{"\x01\x01\x01x\n\x02\x02\x02y\n", "\x02\x02\x02y\n\x01\x01\x01x\n"}, string(logs.body), "0.27 ≤ version < 0.167: raw text")
	raw := string(logs.body)
	logs = c.tb(id, "GET", "/process/session/s1/command/"+plain.CmdID+"/logs", nil)
	assert.Equal(t, map[string]any{"output": raw, "stdout": "x\n", "stderr": "y\n"}, logs.obj(t))

	// Async with stdin.
	status, out = c.sessionExec(id, "s1", "read line; echo got:$line; read other; echo got:$other; exit 4", true)
	require.Equal(t, 202, status)
	require.NotEmpty(t, out.CmdID)
	assert.Nil(t, out.ExitCode)
	cmdPath := "/process/session/s1/command/" + out.CmdID
	cmd := c.tb(id, "GET", cmdPath, nil).obj(t)
	assert.NotContains(t, cmd, "exitCode", "running command has no exitCode")
	require.Equal(t, 204, c.tb(id, "POST", cmdPath+"/input", map[string]any{"data": "hello"}).status)
	require.Eventually(t, func() bool {
		return strings.Contains(c.tb(id, "GET", cmdPath+"/logs", nil).obj(t)["stdout"].(string), "got:hello")
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 204, c.tb(id, "POST", cmdPath+"/input", map[string]any{"data": "world\n"}).status)
	require.Eventually(t, func() bool {
		_, ok := c.tb(id, "GET", cmdPath, nil).obj(t)["exitCode"]
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	assert.EqualValues(t, 4, c.tb(id, "GET", cmdPath, nil).obj(t)["exitCode"])
	logs = c.tb(id, "GET", cmdPath+"/logs", nil)
	assert.Equal(t, "hello\ngot:hello\nworld\ngot:world\n", logs.obj(t)["stdout"], "input is echoed as stdout")
	assert.Equal(t, 410, c.tb(id, "POST", cmdPath+"/input", map[string]any{"data": "late"}).status)
	assert.Equal(t, 404, c.tb(id, "GET", "/process/session/s1/command/nope", nil).status)

	var sess struct {
		SessionID string           `json:"sessionId"`
		Commands  []map[string]any `json:"commands"`
	}
	c.tb(id, "GET", "/process/session/s1", nil).json(t, &sess)
	assert.Equal(t, "s1", sess.SessionID)
	assert.Len(t, sess.Commands, 6)
	var all []map[string]any
	c.tb(id, "GET", "/process/session", nil).json(t, &all)
	assert.Len(t, all, 1)

	// `exit` at top level ends the shell; the command gets its status.
	require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s2"}).status)
	status, out = c.sessionExec(id, "s2", "echo bye; exit 9", false)
	require.Equal(t, 200, status)
	assert.Equal(t, 9, *out.ExitCode)
	assert.Equal(t, 500, c.tb(id, "POST", "/process/session/s2/exec", map[string]any{"command": "true"}).status)

	require.Equal(t, 204, c.tb(id, "DELETE", "/process/session/s1", nil).status)
	assert.Equal(t, 404, c.tb(id, "GET", "/process/session/s1", nil).status)
	assert.Equal(t, 404, c.tb(id, "DELETE", "/process/session/s1", nil).status)
}

// followLogs reads a session-log WebSocket to the end.
// followLogs reads a command's log WebSocket to its close and returns the
// demuxed output, the close status and the size of every frame.
func followLogs(t *testing.T, c *client, id, sid, cmdID string) (*demuxer, websocket.StatusCode, []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, _, err := c.dial(ctx, c.wsURL(id, "/process/session/"+sid+"/command/"+cmdID+"/logs?follow=true"))
	require.NoError(t, err)
	defer conn.CloseNow()
	d := &demuxer{}
	var frames []int
	for {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			d.close()
			return d, websocket.CloseStatus(err), frames
		}
		require.Equal(t, websocket.MessageBinary, typ)
		frames = append(frames, len(b))
		d.write(b)
	}
}

func TestSessionLogsWebSocket(t *testing.T) {
	t.Parallel()
	const script = `for i in $(seq 1 40); do echo "out line $i"; echo "err line $i" >&2; done; sleep 0.2; echo tail; exit 3`
	var wantOut, wantErr strings.Builder
	for i := 1; i <= 40; i++ {
		wantOut.WriteString("out line " + strconv.Itoa(i) + "\n")
		wantErr.WriteString("err line " + strconv.Itoa(i) + "\n")
	}
	wantOut.WriteString("tail\n")

	tests := []struct {
		name  string
		split emulator.FrameSplitter
		size  int
	}{
		{"daemon-like 1 KiB frames", nil, 0},
		{"small frames", nil, 16},
		{"every byte its own frame", emulator.SplitEvery(1), 0},
		{"cut inside every marker", emulator.SplitInsideMarkers(), 0},
		{"random cuts", emulator.SplitRandom(42, 5), 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous, LogFrameSplit: tt.split, LogFrameSize: tt.size})
			id := c.create(nil)["id"].(string)
			require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
			status, out := c.sessionExec(id, "s", script, true)
			require.Equal(t, 202, status)

			d, code, frames := followLogs(t, c, id, "s", out.CmdID)
			assert.Equal(t, websocket.StatusNormalClosure, code)
			assert.Equal(t, wantOut.String(), d.stdout.String())
			assert.Equal(t, wantErr.String(), d.stderr.String())
			if tt.split != nil {
				assert.Greater(t, len(frames), 160, "frames were cut")
			}
			limit := cmp.Or(tt.size, 1024)
			for i, n := range frames {
				require.LessOrEqual(t, n, limit, "frame %d is larger than the frame size", i)
			}
			assert.EqualValues(t, 3, c.tb(id, "GET", "/process/session/s/command/"+out.CmdID, nil).obj(t)["exitCode"],
				"exit code exists once the stream closed")

			// A late follower gets the whole history replayed, then 1000.
			d, code, _ = followLogs(t, c, id, "s", out.CmdID)
			assert.Equal(t, websocket.StatusNormalClosure, code)
			assert.Equal(t, wantOut.String(), d.stdout.String())
		})
	}

	t.Run("session deleted closes 1000", func(t *testing.T) {
		t.Parallel()
		_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		id := c.create(nil)["id"].(string)
		require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
		_, out := c.sessionExec(id, "s", "echo started; sleep 300", true)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		conn, _, err := c.dial(ctx, c.wsURL(id, "/process/session/s/command/"+out.CmdID+"/logs?follow=true"))
		require.NoError(t, err)
		defer conn.CloseNow()
		// The follower is attached once it has had output.
		_, _, err = conn.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, 204, c.tb(id, "DELETE", "/process/session/s", nil).status)
		for err == nil {
			_, _, err = conn.Read(ctx)
		}
		require.NoError(t, ctx.Err(), "follower not closed after session delete")
		assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err))
	})

	t.Run("chunked HTTP follow without upgrade", func(t *testing.T) {
		t.Parallel()
		_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		id := c.create(nil)["id"].(string)
		require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
		_, out := c.sessionExec(id, "s", "echo a; sleep 0.1; echo b >&2", true)
		r := c.tb(id, "GET", "/process/session/s/command/"+out.CmdID+"/logs?follow=true", nil)
		// Both streams, without markers; their relative order is not defined.
		assert.ElementsMatch(t, []string{"a", "b", ""}, strings.Split(string(r.body), "\n"))
	})
}

// ptyConn dials a PTY WebSocket and collects its output.
type ptyConn struct {
	conn *websocket.Conn
	out  strings.Builder
	text []string
}

func dialPty(t *testing.T, c *client, url string, subprotocols ...string) *ptyConn {
	t.Helper()
	conn, _, err := c.dial(t.Context(), url, subprotocols...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	p := &ptyConn{conn: conn}
	typ, b, err := conn.Read(t.Context())
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	p.text = append(p.text, string(b))
	return p
}

// readUntil reads output until it contains want; it returns the close error
// if the connection ends first.
func (p *ptyConn) readUntil(ctx context.Context, want string) error {
	for !strings.Contains(p.out.String(), want) {
		typ, b, err := p.conn.Read(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %q in %q: %w", want, p.out.String(), err)
		}
		if typ == websocket.MessageText {
			p.text = append(p.text, string(b))
			continue
		}
		p.out.Write(b)
	}
	return nil
}

func (p *ptyConn) readToClose(ctx context.Context) error {
	for {
		typ, b, err := p.conn.Read(ctx)
		if err != nil {
			return err
		}
		if typ == websocket.MessageText {
			p.text = append(p.text, string(b))
		} else {
			p.out.Write(b)
		}
	}
}

func (p *ptyConn) send(t *testing.T, s string) {
	t.Helper()
	require.NoError(t, p.conn.Write(t.Context(), websocket.MessageBinary, []byte(s)))
}

func closeReason(t *testing.T, err error) (websocket.StatusCode, map[string]any) {
	t.Helper()
	var ce websocket.CloseError
	require.ErrorAs(t, err, &ce)
	var reason map[string]any
	if ce.Reason != "" {
		require.NoError(t, json.Unmarshal([]byte(ce.Reason), &reason), ce.Reason)
	}
	return ce.Code, reason
}

func TestPTY(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	t.Run("lazy create, connect, echo, exit 0", func(t *testing.T) {
		r := c.tb(id, "POST", "/process/pty", map[string]any{"id": "p1", "lazyStart": true, "envs": map[string]string{"FLAVOUR": "lime"}})
		require.Equal(t, 201, r.status, "%s", r.body)
		assert.Equal(t, map[string]any{"sessionId": "p1"}, r.obj(t))
		assert.Equal(t, 409, c.tb(id, "POST", "/process/pty", map[string]any{"id": "p1"}).status)
		info := c.tb(id, "GET", "/process/pty/p1", nil).obj(t)
		assert.Equal(t, false, info["active"], "lazy PTY has no process before connect")
		assert.EqualValues(t, 80, info["cols"])
		assert.Equal(t, "xterm-256color", info["envs"].(map[string]any)["TERM"])

		p := dialPty(t, c, c.wsURL(id, "/process/pty/p1/connect"))
		assert.JSONEq(t, `{"type":"control","status":"connected"}`, p.text[0])
		p.send(t, "echo \"flavour=$FLAVOUR\"\n")
		require.NoError(t, p.readUntil(ctx, "flavour=lime"))
		assert.Equal(t, true, c.tb(id, "GET", "/process/pty/p1", nil).obj(t)["active"])
		r = c.tb(id, "POST", "/process/pty/p1/resize", map[string]any{"cols": 120, "rows": 40})
		require.Equal(t, 200, r.status)
		assert.EqualValues(t, 120, r.obj(t)["cols"])
		// Ask until the shell reports the new size: an interactive bash busy
		// with its prompt can answer a typed-ahead line with the old one.
		for i := 0; !strings.Contains(p.out.String(), "40 120"); i++ {
			require.Less(t, i, 20, "never saw the new size in %q", p.out.String())
			stale := strings.Count(p.out.String(), "24 80")
			p.send(t, "stty size\n")
			for !strings.Contains(p.out.String(), "40 120") && strings.Count(p.out.String(), "24 80") == stale {
				typ, b, err := p.conn.Read(ctx)
				require.NoError(t, err)
				if typ == websocket.MessageBinary {
					p.out.Write(b)
				}
			}
		}
		p.send(t, "exit\n")
		code, reason := closeReason(t, p.readToClose(ctx))
		assert.Equal(t, websocket.StatusNormalClosure, code)
		assert.Equal(t, map[string]any{"exitCode": float64(0)}, reason)
		assert.Equal(t, 410, c.tb(id, "POST", "/process/pty/p1/resize", map[string]any{"cols": 10, "rows": 10}).status)
		assert.Equal(t, 404, c.tb(id, "GET", "/process/pty/p1", nil).status)
	})

	t.Run("non-zero exit and exit-control message", func(t *testing.T) {
		p := dialPty(t, c, c.wsURL(id, "/process/pty/create-connect?id=p2&cols=90&rows=20"), "X-Daytona-Pty-Exit-Control")
		assert.Equal(t, "X-Daytona-Pty-Exit-Control", p.conn.Subprotocol())
		p.send(t, "exit 3\n")
		code, reason := closeReason(t, p.readToClose(ctx))
		assert.Equal(t, websocket.StatusInternalError, code)
		assert.Equal(t, map[string]any{"exitCode": float64(3), "exitReason": "non-zero exit"}, reason)
		require.GreaterOrEqual(t, len(p.text), 2)
		assert.JSONEq(t, `{"type":"control","status":"exited","exitCode":3,"exitReason":"non-zero exit"}`, p.text[len(p.text)-1])
	})

	t.Run("delete closes 1011 SIGKILL", func(t *testing.T) {
		require.Equal(t, 201, c.tb(id, "POST", "/process/pty", map[string]any{"id": "p3"}).status)
		p := dialPty(t, c, c.wsURL(id, "/process/pty/p3/connect"))
		p.send(t, "echo ready\n")
		require.NoError(t, p.readUntil(ctx, "ready"))
		r := c.tb(id, "DELETE", "/process/pty/p3", nil)
		require.Equal(t, 200, r.status)
		assert.Equal(t, map[string]any{"message": "PTY session deleted"}, r.obj(t))
		code, reason := closeReason(t, p.readToClose(ctx))
		assert.Equal(t, websocket.StatusInternalError, code)
		assert.Equal(t, map[string]any{"exitCode": float64(137), "exitReason": "SIGKILL"}, reason)
		assert.Equal(t, 404, c.tb(id, "DELETE", "/process/pty/p3", nil).status)
	})

	t.Run("unknown session: control error then raw close", func(t *testing.T) {
		p := dialPty(t, c, c.wsURL(id, "/process/pty/ghost/connect"))
		assert.JSONEq(t, `{"type":"control","status":"error","error":"Failed to connect to PTY session: PTY session ghost not found"}`, p.text[0])
		err := p.readToClose(ctx)
		require.Error(t, err)
		assert.Equal(t, websocket.StatusCode(-1), websocket.CloseStatus(err), "no close frame: %v", err)
	})

	t.Run("bad requests", func(t *testing.T) {
		r := c.tb(id, "POST", "/process/pty", map[string]any{})
		assert.Equal(t, 400, r.status)
		assert.Equal(t, "session ID is required", r.obj(t)["error"])
		assert.Equal(t, 400, c.tb(id, "POST", "/process/pty", map[string]any{"id": "big", "cols": 1001}).status)
		assert.Equal(t, 404, c.tb(id, "GET", "/process/pty/none", nil).status)
		var list map[string][]any
		c.tb(id, "GET", "/process/pty", nil).json(t, &list)
		assert.Empty(t, list["sessions"])
	})
	require.Eventually(t, func() bool { return env.Server.LiveProcesses() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// TestPTYKillRightAfterConnectedReachesTheClient: the daemon registers a
// client before it sends "connected", so a kill that follows at once (a host
// stopping a terminal it has just opened) closes that client with the exit
// (1011, 137), never with a "not found" error and a dropped connection.
func TestPTYKillRightAfterConnectedReachesTheClient(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	deleted := make(chan int, 2)
	env.Server.SetAfterPtyConnected(func(sandboxID, ptyID string) {
		// Runs on the server's side of the socket, after "connected" went
		// out and before any output: the kill lands in that window.
		r, err := c.req(ctx, "DELETE", env.ToolboxURL(sandboxID)+"/process/pty/"+ptyID, nil, nil)
		if err != nil {
			r.status = -1
		}
		deleted <- r.status
	})
	for _, tc := range []struct{ name, path string }{
		{"create-connect", "/process/pty/create-connect?id=k1"},
		{"connect to a started PTY", "/process/pty/k2/connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "create-connect" {
				require.Equal(t, 201, c.tb(id, "POST", "/process/pty", map[string]any{"id": "k2"}).status)
			}
			p := dialPty(t, c, c.wsURL(id, tc.path))
			assert.JSONEq(t, `{"type":"control","status":"connected"}`, p.text[0])
			assert.Equal(t, 200, <-deleted)
			code, reason := closeReason(t, p.readToClose(ctx))
			assert.Equal(t, websocket.StatusInternalError, code)
			assert.Equal(t, map[string]any{"exitCode": float64(137), "exitReason": "SIGKILL"}, reason)
			assert.Len(t, p.text, 1, "no error after connected: %q", p.text)
		})
	}
	require.Eventually(t, func() bool { return env.Server.LiveProcesses() == 0 }, 10*time.Second, 10*time.Millisecond)
}

// Every PTY session created is listed, in order, also once its sandbox is
// gone (tests remove what the sessions left in the shared /tmp by it).
func TestPTYSessionIDsListsEverySessionCreated(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	a, b := c.create(nil)["id"].(string), c.create(nil)["id"].(string)
	for _, p := range []struct{ sandbox, id string }{{a, "paperclip-duplex-1"}, {b, "pty-2"}, {a, "paperclip-duplex-3"}} {
		r := c.tb(p.sandbox, "POST", "/process/pty", map[string]any{"id": p.id, "lazyStart": true})
		require.Equal(t, 201, r.status, "%s", r.body)
	}
	require.Equal(t, 409, c.tb(a, "POST", "/process/pty", map[string]any{"id": "paperclip-duplex-1", "lazyStart": true}).status)
	want := []string{"paperclip-duplex-1", "pty-2", "paperclip-duplex-3"}
	assert.Equal(t, want, env.Server.PTYSessionIDs())
	require.Equal(t, 200, c.api("DELETE", "/sandbox/"+a, nil).status)
	r := c.do("GET", env.HTTP.URL+"/_emulator/pty-sessions", nil)
	require.Equal(t, 200, r.status)
	var listed []string
	require.NoError(t, json.Unmarshal(r.body, &listed))
	assert.Equal(t, want, listed)
}
