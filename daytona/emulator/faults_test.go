package emulator_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

func TestFaults(t *testing.T) {
	t.Parallel()

	t.Run("429 with Retry-After, once", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		env.Server.AddFault(emulator.Fault{Method: "POST", Path: `^/api/sandbox$`, Status: 429, RetryAfter: "2", Times: 1})
		r := c.api("POST", "/sandbox", map[string]any{})
		require.Equal(t, 429, r.status)
		assert.Equal(t, "2", r.header.Get("Retry-After"))
		assert.Equal(t, "2", r.header.Get("Retry-After-sandbox-create"))
		assert.Equal(t, map[string]any{"statusCode": float64(429), "message": "Rate limit exceeded", "error": "Too Many Requests"}, r.obj(t))
		c.create(nil)
		assert.Equal(t, 2, env.Server.Requests()["POST /api/sandbox"], "both attempts counted")
		assert.Empty(t, env.Server.Faults(), "a Times fault removes itself")
	})

	t.Run("503 scoped to one sandbox and a toolbox route", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		a := c.create(nil)["id"].(string)
		b := c.create(nil)["id"].(string)
		remove := env.Server.AddFault(emulator.Fault{Path: `/process/execute$`, SandboxID: a, Status: 503})
		r := c.tb(a, "POST", "/process/execute", map[string]any{"command": "true"})
		require.Equal(t, 503, r.status)
		assert.Equal(t, "SERVICE_UNAVAILABLE", r.obj(t)["code"])
		code, _ := c.execute(b, "true")
		assert.Equal(t, 0, code)
		r = c.api("POST", "/sandbox/"+a+"/stop", nil)
		assert.Equal(t, 200, r.status, "other routes of the sandbox are not affected")
		remove()
		assert.Empty(t, env.Server.Faults())
	})

	t.Run("hang until the client gives up", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		id := c.create(nil)["id"].(string)
		env.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/`, Hang: true})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := c.req(ctx, "GET", env.APIURL+"/sandbox/"+id, nil, nil)
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	})

	t.Run("latency delays the real handler", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		env.Server.AddFault(emulator.Fault{Path: `^/api/snapshots/`, Latency: 50 * time.Millisecond, Times: 1})
		begin := time.Now()
		r := c.api("GET", "/snapshots/daytona-small", nil)
		assert.Equal(t, 200, r.status)
		assert.GreaterOrEqual(t, time.Since(begin), 50*time.Millisecond)
	})

	t.Run("WebSocket dropped mid-stream", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		id := c.create(nil)["id"].(string)
		require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
		_, out := c.sessionExec(id, "s", "for i in $(seq 1 50); do echo line-$i; done", false)
		env.Server.AddFault(emulator.Fault{Path: `/logs$`, DropWebSocketAfterBytes: 100})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		conn, _, err := c.dial(ctx, c.wsURL(id, "/process/session/s/command/"+out.CmdID+"/logs?follow=true"))
		require.NoError(t, err)
		defer conn.CloseNow()
		got := 0
		for {
			_, b, err := conn.Read(ctx)
			if err != nil {
				assert.Equal(t, websocket.StatusCode(-1), websocket.CloseStatus(err), "no close frame: %v", err)
				break
			}
			got += len(b)
		}
		assert.Equal(t, 100, got)
	})

	t.Run("admin API", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		admin := func(method, path string, body any) resp {
			return c.do(method, env.HTTP.URL+"/_emulator"+path, body)
		}
		r := admin("POST", "/faults", map[string]any{"method": "GET", "path": "^/api/sandbox$", "status": 503, "latency": "1ms", "times": 2})
		require.Equal(t, 201, r.status, "%s", r.body)
		fid := int(r.obj(t)["id"].(float64))
		var faults []map[string]any
		admin("GET", "/faults", nil).json(t, &faults)
		require.Len(t, faults, 1)
		assert.Equal(t, "1ms", faults[0]["latency"])
		assert.Equal(t, 503, c.api("GET", "/sandbox", nil).status)
		assert.Equal(t, 204, admin("DELETE", "/faults/"+strconv.Itoa(fid), nil).status)
		assert.Equal(t, 200, c.api("GET", "/sandbox", nil).status)
		assert.Equal(t, 400, admin("POST", "/faults", map[string]any{"path": "("}).status)

		id := c.create(map[string]any{"labels": map[string]string{"x": "y"}})["id"].(string)
		var views []emulator.SandboxView
		admin("GET", "/sandboxes", nil).json(t, &views)
		require.Len(t, views, 1)
		assert.Equal(t, "started", views[0].State)
		assert.Equal(t, map[string]string{"x": "y"}, views[0].Labels)

		require.Equal(t, 204, admin("POST", "/sandboxes/"+id+"/missing-container", nil).status)
		sb := c.api("GET", "/sandbox/"+id, nil).obj(t)
		assert.Equal(t, "error", sb["state"])
		assert.Equal(t, false, sb["recoverable"])
		assert.Equal(t, emulator.MissingContainerReason(id), sb["errorReason"])
		assert.Equal(t, "not found: failed to inspect sandbox container "+id+": Error response from daemon: No such container: "+id, sb["errorReason"])
		assert.Equal(t, emulator.MissingContainerReason(id), c.api("GET", "/sandbox/"+id, nil).obj(t)["errorReason"], "stays on refresh")

		id2 := c.create(nil)["id"].(string)
		require.Equal(t, 204, admin("POST", "/sandboxes/"+id2+"/error", map[string]any{"reason": "disk full", "recoverable": true}).status)
		assert.Equal(t, true, c.api("GET", "/sandbox/"+id2, nil).obj(t)["recoverable"])
		assert.Equal(t, 404, admin("POST", "/sandboxes/nope/stop", nil).status)
		require.Equal(t, 204, admin("POST", "/sandboxes/"+id2+"/stop", nil).status)
		assert.Equal(t, "stopped", c.api("GET", "/sandbox/"+id2, nil).obj(t)["state"])

		var counts map[string]int
		admin("GET", "/requests", nil).json(t, &counts)
		assert.Equal(t, 2, counts["POST /api/sandbox"])
		assert.Zero(t, counts["POST /api/sandbox/{idOrName}/stop"], "admin calls are not counted")
		require.Equal(t, 204, admin("DELETE", "/requests", nil).status)
		assert.Empty(t, env.Server.Requests())

		c.api("POST", "/sandbox/"+id2+"/ttl/30", nil)
		r = admin("POST", "/clock", map[string]any{"advance": "31m"})
		require.Equal(t, 200, r.status, "%s", r.body)
		assert.Equal(t, 404, c.api("GET", "/sandbox/"+id2, nil).status, "TTL elapsed on the advanced clock")
	})
}

// TestStopKillsProcessesStartRestoresFiles checks a stop ends every process
// of the sandbox (sessions with their children, PTYs, running commands),
// keeps files, and that start brings the files back.
func TestStopKillsProcessesStartRestoresFiles(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	home := env.Server.Sandboxes()[0].HomeDir

	require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
	_, out := c.sessionExec(id, "s", "sleep 300 & echo $! > bg.pid; echo keep > kept.txt", false)
	require.Equal(t, 0, *out.ExitCode)
	require.Equal(t, 201, c.tb(id, "POST", "/process/pty", map[string]any{"id": "p"}).status)
	running := make(chan resp, 1)
	go func() {
		r, _ := c.req(context.Background(), "POST", env.ToolboxURL(id)+"/process/execute",
			map[string]any{"command": "echo $$ > exec.pid; exec sleep 300"}, nil)
		running <- r
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(home, "exec.pid")); return err == nil }, 10*time.Second, 5*time.Millisecond)
	// The PTY's interactive login shell runs short-lived helpers from its
	// profile while it starts, so the count settles rather than holds at once.
	var last atomic.Int64
	settled := assert.Eventually(t, func() bool {
		v, _ := env.Server.Sandbox(id)
		last.Store(int64(v.Processes))
		return v.Processes == 4
	}, 10*time.Second, 10*time.Millisecond, "session shell, its background sleep, PTY shell, execute's sleep")
	if !settled {
		t.Logf("last process count: %d", last.Load())
	}

	r := c.api("POST", "/sandbox/"+id+"/stop", nil)
	require.Equal(t, 200, r.status)
	for _, f := range []string{"bg.pid", "exec.pid"} {
		b, err := os.ReadFile(filepath.Join(home, f))
		require.NoError(t, err)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		waitGone(t, pid)
	}
	select {
	case r := <-running:
		assert.Equal(t, 200, r.status, "the killed command still answers")
	case <-time.After(10 * time.Second):
		t.Fatal("execute did not return after stop")
	}
	v, _ := env.Server.Sandbox(id)
	assert.Zero(t, v.Processes, "a stopped sandbox runs nothing")
	r = c.tb(id, "GET", "/work-dir", nil)
	assert.Equal(t, 400, r.status, "toolbox unreachable while stopped")
	assert.Contains(t, r.obj(t)["message"], "Is the Sandbox started?")

	require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/start", nil).status)
	_, txt := c.execute(id, "cat kept.txt")
	assert.Equal(t, "keep\n", txt)
	assert.Equal(t, 404, c.tb(id, "GET", "/process/session/s", nil).status, "sessions do not survive a stop")
	assert.Equal(t, 404, c.tb(id, "GET", "/process/pty/p", nil).status, "PTYs do not survive a stop")
}

func TestDeleteRemovesFolderAndExternalFiles(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	dir := env.Server.Sandboxes()[0].Dir
	ext := filepath.Join(os.TempDir(), "emulator-ext-"+id)
	t.Cleanup(func() { os.RemoveAll(ext) })
	require.Equal(t, 201, c.tb(id, "POST", "/files/folder?"+q(ext+"/nested"), nil).status)
	require.DirExists(t, ext)

	require.Equal(t, 200, c.api("DELETE", "/sandbox/"+id, nil).status)
	assert.NoDirExists(t, dir, "the sandbox folder is gone with the sandbox")
	require.Eventually(t, func() bool { _, err := os.Stat(ext); return os.IsNotExist(err) }, 10*time.Second, 5*time.Millisecond,
		"files created outside the sandbox folder are removed too")
	assert.Empty(t, env.Server.Sandboxes())
}

// TestCloseLeavesNoProcess starts processes of every kind, closes the server
// and checks each one is gone.
func TestCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	srv, err := emulator.New(emulator.Options{StepDelay: emulator.Synchronous})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	root := srv.Root()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &client{t: t, http: &http.Client{Transport: tr}, key: emulator.DevAPIKey, sdk: "0.218.0"}
	c.env = envFor(ts, srv)
	id := c.create(nil)["id"].(string)
	home := srv.Sandboxes()[0].HomeDir

	require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
	_, out := c.sessionExec(id, "s", "sleep 300 & echo $! > s.pid", false)
	require.Equal(t, 0, *out.ExitCode)
	status, _ := c.sessionExec(id, "s", "echo $$ > shell.pid; sleep 300", true)
	require.Equal(t, 202, status)
	conn := dialPty(t, c, c.wsURL(id, "/process/pty/create-connect?id=p"))
	conn.send(t, "echo $$ > "+home+"/pty.pid; sleep 300\n")
	go func() {
		_, _ = c.req(context.Background(), "POST", ts.URL+"/toolbox/"+id+"/process/execute",
			map[string]any{"command": "echo $$ > exec.pid; sleep 300"}, nil)
	}()
	pids := map[string]int{}
	require.Eventually(t, func() bool {
		for _, f := range []string{"s.pid", "shell.pid", "pty.pid", "exec.pid"} {
			b, err := os.ReadFile(filepath.Join(home, f))
			if err != nil || len(strings.TrimSpace(string(b))) == 0 {
				return false
			}
			pids[f], _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, srv.Close())
	for f, pid := range pids {
		assert.True(t, processGone(pid), "%s: process %d survived Close", f, pid)
	}
	assert.Equal(t, 0, srv.LiveProcesses())
	assert.NoDirExists(t, root, "a temporary root is removed")
	require.NoError(t, srv.Close(), "Close is idempotent")
}
