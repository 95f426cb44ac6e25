package emulator_test

import (
	"context"
	"errors"
	"io"
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

	t.Run("log stream half-open after the command ends", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		id := c.create(nil)["id"].(string)
		require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
		_, out := c.sessionExec(id, "s", "echo one; echo two >&2", false)
		require.Equal(t, 0, *out.ExitCode, "the command has ended")
		env.Server.AddFault(emulator.Fault{Path: `/logs$`, HalfOpenAfterEnd: true, Times: 2})
		logs := "/process/session/s/command/" + out.CmdID + "/logs?follow=true"

		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		conn, _, err := c.dial(ctx, c.wsURL(id, logs))
		require.NoError(t, err)
		defer conn.CloseNow()
		var d demuxer
		for d.stdout.String() != "one\n" || d.stderr.String() != "two\n" {
			_, b, err := conn.Read(ctx)
			require.NoError(t, err, "the output arrives in full first")
			d.write(b)
		}
		// Then nothing: no close frame and no end, however long one waits
		// (a short wait suffices to see that it is not immediate).
		quiet, stop := context.WithTimeout(ctx, 300*time.Millisecond)
		_, _, err = conn.Read(quiet)
		stop()
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the stream ended: %v", err)

		// The chunked HTTP follow holds its body open the same way.
		hctx, hcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer hcancel()
		req, err := http.NewRequestWithContext(hctx, "GET", env.ToolboxURL(id)+logs, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+env.APIKey)
		res, err := c.http.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the body ended")
		lines := strings.SplitAfter(string(body), "\n")
		assert.ElementsMatch(t, []string{"one\n", "two\n", ""}, lines, "both streams, in the order the labelers wrote them")
		assert.Empty(t, env.Server.Faults())
	})

	for _, tc := range []struct {
		name  string
		clock bool // Options.ClockTimers, on a clock that stands still
	}{{"exit code published after a delay", false}, {"exit code published after a delay on the emulator's clock", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := emulator.Options{StepDelay: emulator.Synchronous}
			// In real time, long enough for the first read to come before it
			// unless the machine stalls.
			delay := 500 * time.Millisecond
			if tc.clock {
				still := time.Now()
				opts.ClockTimers, opts.Clock, delay = true, func() time.Time { return still }, time.Minute
			}
			env, c := start(t, opts)
			id := c.create(nil)["id"].(string)
			require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
			env.Server.AddFault(emulator.Fault{Path: `/exec$`, ExitCodeDelay: delay, Times: 1})
			dispatched := time.Now()
			status, out := c.sessionExec(id, "s", "echo done; (exit 3)", true)
			require.Equal(t, 202, status)

			// The followed log ends normally once the output is complete...
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			conn, _, err := c.dial(ctx, c.wsURL(id, "/process/session/s/command/"+out.CmdID+"/logs?follow=true"))
			require.NoError(t, err)
			defer conn.CloseNow()
			var d demuxer
			for {
				_, b, err := conn.Read(ctx)
				if err != nil {
					assert.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(err), "%v", err)
					break
				}
				d.write(b)
			}
			assert.Equal(t, "done\n", d.stdout.String())

			// ...while the exit code is not there yet (it cannot be before the
			// delay has passed since the dispatch)...
			cmd := func() map[string]any {
				return c.tb(id, "GET", "/process/session/s/command/"+out.CmdID, nil).obj(t)
			}
			first := cmd()
			if elapsed := time.Since(dispatched); tc.clock || elapsed < delay {
				assert.Nil(t, first["exitCode"], "the exit code showed %s after the dispatch", elapsed)
			} else {
				t.Logf("the machine stalled for %s: the early read is not checked", elapsed)
			}
			if tc.clock {
				env.Server.AdvanceClock(delay - time.Nanosecond)
				assert.Nil(t, cmd()["exitCode"], "the exit code showed before the delay had passed on the clock")
				env.Server.AdvanceClock(time.Nanosecond)
			}
			// ...and it shows up after the delay.
			require.Eventually(t, func() bool { return cmd()["exitCode"] != nil }, 30*time.Second, 5*time.Millisecond)
			assert.EqualValues(t, 3, cmd()["exitCode"])
			if !tc.clock {
				assert.GreaterOrEqual(t, time.Since(dispatched), delay)
			}

			// Later commands are not delayed (the fault hit once).
			_, again := c.sessionExec(id, "s", "(exit 4)", false)
			require.NotNil(t, again.ExitCode)
			assert.Equal(t, 4, *again.ExitCode)
		})
	}

	t.Run("connection reset after part of the answer", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		id := c.create(nil)["id"].(string)
		home := env.Server.Sandboxes()[0].HomeDir
		for _, after := range []int{0, 10} {
			env.Server.AddFault(emulator.Fault{Path: `/process/execute$`, Reset: true, ResetAfterBytes: after, Times: 1})
			marker := "ran-" + strconv.Itoa(after)
			r, err := c.req(t.Context(), "POST", env.ToolboxURL(id)+"/process/execute", map[string]any{"command": "echo x > " + marker + "; echo done"}, nil)
			require.Error(t, err, "after %d bytes: the client sees the connection cut (got %d %s)", after, r.status, r.body)
			if after > 0 {
				assert.Len(t, r.body, after, "the budget's bytes arrived first")
			}
			_, err = os.Stat(filepath.Join(home, marker))
			assert.NoError(t, err, "the command ran: only its answer was lost")
		}
		code, out := c.execute(id, "echo whole")
		assert.Equal(t, 0, code)
		assert.Equal(t, "whole\n", out, "the fault hit once per installation")
		hits := env.Server.FaultHits()
		require.Len(t, hits, 2)
		assert.Equal(t, id, hits[0].SandboxID)
		assert.Equal(t, "/toolbox/"+id+"/process/execute", hits[1].Path)
		env.Server.ResetFaultHits()
		assert.Empty(t, env.Server.FaultHits())
	})

	t.Run("slow body", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		id := c.create(nil)["id"].(string)
		env.Server.AddFault(emulator.Fault{Path: `/process/execute$`, SlowBody: 20 * time.Millisecond, SlowBodyChunk: 8, Times: 1})
		begin := time.Now()
		code, out := c.execute(id, "seq 1 20")
		assert.Equal(t, 0, code)
		assert.Equal(t, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n", out, "the whole body arrives")
		assert.GreaterOrEqual(t, time.Since(begin), 100*time.Millisecond, "in pieces, spaced out")
	})

	t.Run("a proxy's HTML error page", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		const page = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>"
		env.Server.AddFault(emulator.Fault{Path: `^/api/sandbox`, Status: 502, Body: page, Times: 1})
		r := c.api("GET", "/sandbox", nil)
		assert.Equal(t, 502, r.status)
		assert.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
		assert.Equal(t, page, string(r.body))
	})

	t.Run("an empty body", func(t *testing.T) {
		t.Parallel()
		env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
		env.Server.AddFault(emulator.Fault{Path: `^/api/sandbox`, Status: 503, EmptyBody: true, Body: "ignored", Times: 1})
		r := c.api("GET", "/sandbox", nil)
		assert.Equal(t, 503, r.status)
		assert.Empty(t, r.body)
		assert.Empty(t, r.header.Get("Content-Type"))
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
		assert.Equal(t, 400, admin("POST", "/faults", map[string]any{"exitCodeDelay": "soon"}).status)
		r = admin("POST", "/faults", map[string]any{"path": "/logs$", "halfOpenAfterEnd": true, "exitCodeDelay": "2s"})
		require.Equal(t, 201, r.status, "%s", r.body)
		installed := env.Server.Faults()
		require.Len(t, installed, 1)
		assert.True(t, installed[0].Fault.HalfOpenAfterEnd)
		assert.Equal(t, 2*time.Second, installed[0].Fault.ExitCodeDelay)
		admin("GET", "/faults", nil).json(t, &faults)
		assert.Equal(t, true, faults[0]["halfOpenAfterEnd"])
		assert.Equal(t, "2s", faults[0]["exitCodeDelay"])
		assert.Equal(t, 204, admin("DELETE", "/faults", nil).status)
		r = admin("POST", "/faults", map[string]any{"reset": true, "resetAfterBytes": 7, "slowBody": "5ms", "slowBodyChunk": 3})
		require.Equal(t, 201, r.status, "%s", r.body)
		installed = env.Server.Faults()
		require.Len(t, installed, 1)
		assert.Equal(t, emulator.Fault{Reset: true, ResetAfterBytes: 7, SlowBody: 5 * time.Millisecond, SlowBodyChunk: 3}, installed[0].Fault)
		admin("GET", "/faults", nil).json(t, &faults)
		assert.Equal(t, "5ms", faults[0]["slowBody"])
		assert.Equal(t, 400, admin("POST", "/faults", map[string]any{"resetAfterBytes": -1}).status)
		assert.Equal(t, 204, admin("DELETE", "/faults", nil).status)

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

// TestRecordingCollectsEachRequest checks that a recording sees every
// request between Record and Stop, in order, with its route and sandbox.
func TestRecordingCollectsEachRequest(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	a := c.create(nil)["id"].(string)
	b := c.create(nil)["id"].(string)

	rec := env.Server.Record()
	c.api("GET", "/sandbox/"+a, nil)
	c.tb(b, "GET", "/work-dir", nil)
	inner := env.Server.Record()
	c.api("GET", "/sandbox/"+b, nil)
	inner.Stop()
	assert.Equal(t, []string{"GET /api/sandbox/{idOrName}"}, inner.Routes(), "recordings overlap")
	c.api("POST", "/sandbox/"+a+"/stop", nil)
	c.do("GET", env.HTTP.URL+"/_emulator/sandboxes", nil)
	got := rec.Stop()
	c.api("GET", "/sandbox/"+a, nil)

	assert.Equal(t, []string{"GET /api/sandbox/{idOrName}", "GET /toolbox/{sandboxId}/work-dir",
		"GET /api/sandbox/{idOrName}", "POST /api/sandbox/{idOrName}/stop"}, rec.Routes(), "admin calls and calls after Stop are not recorded")
	require.Len(t, got, 4)
	assert.Equal(t, emulator.RequestRecord{Method: "GET", Path: "/api/sandbox/" + a, Route: "GET /api/sandbox/{idOrName}", SandboxID: a}, got[0])
	assert.Equal(t, b, got[1].SandboxID)
	assert.Equal(t, 1, rec.Count("GET /api/sandbox/{idOrName}", a))
	assert.Equal(t, 1, rec.Count("GET /api/sandbox/{idOrName}", b))
	assert.Equal(t, 2, rec.Count("GET /api/sandbox/{idOrName}", ""))
	assert.Zero(t, rec.Count("GET /toolbox/{sandboxId}/work-dir", a))
}
