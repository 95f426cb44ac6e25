package daytona_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// The tests in this file run the client against the emulator: real HTTP, real
// WebSockets, real processes. Only back-off sleeps are faked (sleepRecorder),
// so retry schedules cost no time.

// sleepRecorder is a Clock whose Sleep returns at once (recording the
// duration) and whose Now follows real time plus the slept total.
type sleepRecorder struct {
	mu     sync.Mutex
	offset time.Duration
	sleeps []time.Duration
}

func (s *sleepRecorder) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.offset)
}

func (s *sleepRecorder) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.sleeps = append(s.sleeps, d)
	s.offset += d
	s.mu.Unlock()
	// Yield a little real time so that emulator state machines progress
	// while a wait polls.
	t := time.NewTimer(min(d, 5*time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *sleepRecorder) Sleeps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sleeps)
}

// emulatorTime is a Clock on the time of an emulator whose delays run on
// its clock (Options.ClockTimers) and whose clock stands still: a sleep moves
// the emulator's clock instead of waiting, so what a wait polls for falls
// due as the client sleeps, and nothing changes between two requests sent
// without a sleep.
type emulatorTime struct {
	sleepRecorder
	srv *emulator.Server
}

func (c *emulatorTime) Sleep(ctx context.Context, d time.Duration) error {
	c.srv.AdvanceClock(d)
	return c.sleepRecorder.Sleep(ctx, d)
}

type env struct {
	*emulatortest.Env
	c     *daytona.Client
	clock *sleepRecorder
}

func startEnv(t testing.TB, opts emulator.Options, mutate ...func(*daytona.Config)) *env {
	t.Helper()
	e := emulatortest.Start(t, opts)
	clock := &sleepRecorder{}
	cfg := daytona.Config{
		APIKey:     e.APIKey,
		APIURL:     e.APIURL,
		HTTPClient: e.HTTP.Client(),
		Source:     "daytona-worker-test",
		Clock:      clock,
		Rand:       func() float64 { return 0.5 },
	}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := daytona.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: e, c: c, clock: clock}
}

// noUnmatched fails when the client called a route the emulator does not
// know (a wrong path or method).
func (e *env) noUnmatched(t testing.TB) {
	t.Helper()
	for k := range e.Server.Requests() {
		if strings.HasPrefix(k, "UNMATCHED") {
			t.Errorf("client called an unknown route: %s", k)
		}
	}
}

func (e *env) create(t testing.TB, p daytona.CreateParams) (*daytona.Sandbox, *daytona.Toolbox) {
	t.Helper()
	sb, err := e.c.CreateAndWait(t.Context(), p, 30*time.Second)
	if err != nil {
		t.Fatalf("CreateAndWait: %v", err)
	}
	return sb, e.c.Toolbox(sb)
}

func TestEmulatorLifecycle(t *testing.T) {
	t.Parallel()
	for _, transitional := range []bool{false, true} {
		t.Run(fmt.Sprintf("transitional=%v", transitional), func(t *testing.T) {
			t.Parallel()
			e := startEnv(t, emulator.Options{ReturnTransitional: transitional})
			ctx := t.Context()
			name := "life-" + fmt.Sprint(transitional)
			sb, err := e.c.CreateAndWait(ctx, daytona.CreateParams{
				Name: name, Language: "python", Labels: map[string]string{"team": "a", "run": name},
				Env: map[string]string{"GREETING": "hi"}, AutoStopInterval: testutil.Ptr(0.0),
			}, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if sb.State != daytona.StateStarted || sb.Labels[daytona.LanguageLabel] != "python" || sb.Labels["team"] != "a" ||
				sb.ToolboxProxyURL == "" || sb.Target == "" || sb.AutoStopInterval != 0 {
				t.Errorf("created %+v", sb)
			}
			byName, err := e.c.Get(ctx, name)
			if err != nil || byName.ID != sb.ID {
				t.Fatalf("Get by name = %v, %v", byName, err)
			}
			var found []string
			for s, err := range e.c.ListAll(ctx, &daytona.ListOptions{Labels: map[string]string{"run": name}, Limit: 1}) {
				if err != nil {
					t.Fatal(err)
				}
				found = append(found, s.ID)
			}
			if !slices.Equal(found, []string{sb.ID}) {
				t.Errorf("ListAll by label = %v", found)
			}
			res, err := e.c.Toolbox(sb).Execute(ctx, daytona.ExecuteRequest{Command: "echo $GREETING"})
			if err != nil || strings.TrimSpace(res.Result) != "hi" {
				t.Fatalf("Execute = %+v, %v", res, err)
			}

			stopped, err := e.c.StopAndWait(ctx, sb.ID, nil, 30*time.Second)
			if err != nil || stopped.State != daytona.StateStopped {
				t.Fatalf("StopAndWait = %v, %v", stopped, err)
			}
			if _, err := e.c.Stop(ctx, sb.ID, nil); !errors.Is(err, daytona.ErrBadRequest) {
				t.Errorf("stop of a stopped sandbox: %v", err)
			}
			if _, err := e.c.Archive(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.c.WaitForState(ctx, sb.ID, 30*time.Second, daytona.StateArchived); err != nil {
				t.Fatal(err)
			}
			started, err := e.c.StartAndWait(ctx, sb.ID, 30*time.Second)
			if err != nil || started.State != daytona.StateStarted {
				t.Fatalf("StartAndWait from archived = %v, %v", started, err)
			}
			if err := e.c.DeleteAndWait(ctx, sb.ID, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := e.c.Get(ctx, sb.ID); !errors.Is(err, daytona.ErrNotFound) {
				t.Errorf("Get after delete: %v", err)
			}
			e.noUnmatched(t)
		})
	}
}

func TestEmulatorCreateFromImage(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{})
	sb, err := e.c.CreateAndWait(t.Context(), daytona.CreateParams{
		Image: "ubuntu:22.04", Resources: &daytona.Resources{CPU: testutil.Ptr(2.0), Memory: testutil.Ptr(4.0), Disk: testutil.Ptr(8.0)},
	}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if sb.BuildInfo == nil || sb.BuildInfo.DockerfileContent != "FROM ubuntu:22.04\n" || sb.CPU != 2 || sb.Memory != 4 || sb.Disk != 8 {
		t.Errorf("sandbox = %+v build %+v", sb, sb.BuildInfo)
	}
	e.noUnmatched(t)
}

func TestEmulatorTypedErrors(t *testing.T) {
	t.Parallel()
	// The steps run on the emulator's clock, which only the client's sleeps
	// move: a start sent right after a stop finds the sandbox stopping.
	still := time.Now()
	clock := &emulatorTime{}
	e := startEnv(t, emulator.Options{StepDelay: 2 * time.Second, ReturnTransitional: true, ClockTimers: true, Clock: func() time.Time { return still }},
		func(c *daytona.Config) { c.Clock = clock })
	clock.srv = e.Server
	ctx := t.Context()
	sb, tb := e.create(t, daytona.CreateParams{Name: "dup"})

	// 404, with the NestJS body.
	_, err := e.c.Get(ctx, "no-such-sandbox")
	var ae *daytona.APIError
	if !errors.Is(err, daytona.ErrNotFound) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "no-such-sandbox") {
		t.Errorf("Get unknown: %v", err)
	}
	// 409: duplicate name, and a lifecycle call during a transition.
	if _, err := e.c.Create(ctx, daytona.CreateParams{Name: "dup"}); !errors.Is(err, daytona.ErrConflict) {
		t.Errorf("duplicate name: %v", err)
	}
	if _, err := e.c.Stop(ctx, sb.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Start(ctx, sb.ID); !errors.Is(err, daytona.ErrConflict) {
		t.Errorf("start while stopping: %v", err)
	}
	if _, err := e.c.WaitUntilStopped(ctx, sb.ID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// 400: unknown snapshot; toolbox of a stopped sandbox.
	if _, err := e.c.Create(ctx, daytona.CreateParams{Snapshot: "no-such-snapshot"}); !errors.Is(err, daytona.ErrBadRequest) {
		t.Errorf("unknown snapshot: %v", err)
	}
	if _, err := tb.WorkDir(ctx); !errors.Is(err, daytona.ErrBadRequest) {
		t.Errorf("toolbox of a stopped sandbox: %v", err)
	}
	// 401 on both planes, without leaking the key.
	bad, err := daytona.New(daytona.Config{APIKey: "wrong-key-123456", APIURL: e.APIURL, HTTPClient: e.HTTP.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Get(ctx, sb.ID); !errors.Is(err, daytona.ErrUnauthorized) || strings.Contains(err.Error(), "wrong-key-123456") {
		t.Errorf("control plane with a bad key: %v", err)
	}
	if _, err := bad.Toolbox(sb).WorkDir(ctx); !errors.Is(err, daytona.ErrUnauthorized) {
		t.Errorf("toolbox with a bad key: %v", err)
	}
	// 403 and 429 injected.
	remove := e.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/`, Status: 403, Times: 1})
	if _, err := e.c.Get(ctx, sb.ID); !errors.Is(err, daytona.ErrForbidden) {
		t.Errorf("403: %v", err)
	}
	remove()
	e.Server.AddFault(emulator.Fault{Method: "POST", Path: `^/api/sandbox$`, Status: 429, RetryAfter: "7", Times: 1})
	before := e.Server.Requests()["POST /api/sandbox"]
	_, err = e.c.Create(ctx, daytona.CreateParams{})
	if ra, ok := daytona.RetryAfter(err); !errors.Is(err, daytona.ErrRateLimited) || !ok || ra != 7*time.Second {
		t.Errorf("429: %v (retry after %v)", err, ra)
	}
	if n := e.Server.Requests()["POST /api/sandbox"] - before; n != 1 {
		t.Errorf("rate-limited create sent %d times; mutations must not be retried", n)
	}
	e.noUnmatched(t)
}

func TestEmulatorToolboxErrors(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	// 408 from a command timeout.
	_, err := tb.Execute(ctx, daytona.ExecuteRequest{Command: "sleep 5", Timeout: time.Second})
	if !errors.Is(err, daytona.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("execute timeout: %v", err)
	}
	// 404 with an empty body from the fs handlers.
	_, err = tb.FileInfo(ctx, "/definitely/missing")
	if !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("FileInfo missing: %v", err)
	}
	// 409 on a move onto an existing file.
	for _, p := range []string{"a.txt", "b.txt"} {
		if err := tb.UploadFile(ctx, p, strings.NewReader(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tb.MoveFile(ctx, "a.txt", "b.txt"); !errors.Is(err, daytona.ErrConflict) {
		t.Errorf("move onto existing: %v", err)
	}
	// 410: input to a finished command.
	if err := tb.CreateSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if err := tb.CreateSession(ctx, "s"); !errors.Is(err, daytona.ErrConflict) {
		t.Errorf("duplicate session: %v", err)
	}
	res, err := tb.SessionExec(ctx, "s", daytona.SessionExecRequest{Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.SendSessionInput(ctx, "s", res.CmdID, "x"); !errors.Is(err, daytona.ErrGone) {
		t.Errorf("input to a finished command: %v", err)
	}
	// A sync exec bounded on the client side.
	if _, err := tb.SessionExec(ctx, "s", daytona.SessionExecRequest{Command: "sleep 5", Timeout: 200 * time.Millisecond}); !errors.Is(err, daytona.ErrTimeout) ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("bounded sync exec: %v", err)
	}
	// Unknown session: the daemon answers 500 "session not found".
	if _, err := tb.SessionExec(ctx, "nope", daytona.SessionExecRequest{Command: "true"}); !errors.Is(err, daytona.ErrServer) ||
		!strings.Contains(err.Error(), "session not found") {
		t.Errorf("exec in unknown session: %v", err)
	}
	if _, err := tb.GetSession(ctx, "nope"); !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	e.noUnmatched(t)
}

func TestEmulatorRetries(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	sb, tb := e.create(t, daytona.CreateParams{})
	get := "GET /api/sandbox/{idOrName}"

	// 503 twice, then the real answer.
	e.Server.ResetRequests()
	e.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/`, SandboxID: sb.ID, Status: 503, Times: 2})
	if _, err := e.c.Get(ctx, sb.ID); err != nil {
		t.Fatalf("Get through two 503s: %v", err)
	}
	if n := e.Server.Requests()[get]; n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
	// 429 with Retry-After: honoured.
	before := len(e.clock.Sleeps())
	e.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/`, SandboxID: sb.ID, Status: 429, RetryAfter: "2", Times: 1})
	if _, err := e.c.Get(ctx, sb.ID); err != nil {
		t.Fatalf("Get through a 429: %v", err)
	}
	if s := e.clock.Sleeps()[before:]; !slices.Equal(s, []time.Duration{2 * time.Second}) {
		t.Errorf("sleeps = %v, want [2s]", s)
	}
	// Toolbox reads retry too.
	e.Server.AddFault(emulator.Fault{Method: "GET", Path: `/work-dir$`, Status: 502, Times: 1})
	if _, err := tb.WorkDir(ctx); err != nil {
		t.Errorf("WorkDir through a 502: %v", err)
	}
	// A Retry-After beyond the deadline: the 429 comes back at once.
	e.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/`, SandboxID: sb.ID, Status: 429, RetryAfter: "30", Times: 1})
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := e.c.Get(dctx, sb.ID)
	cancel()
	if !errors.Is(err, daytona.ErrRateLimited) {
		t.Errorf("429 past the deadline: %v", err)
	}
	// A hang: the deadline ends it, as a timeout.
	remove := e.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/`, SandboxID: sb.ID, Hang: true})
	dctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = e.c.Get(dctx, sb.ID)
	cancel()
	remove()
	if !errors.Is(err, daytona.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang: %v", err)
	}
	// Persistent 503 on a mutation: one attempt only.
	e.Server.ResetRequests()
	remove = e.Server.AddFault(emulator.Fault{Method: "POST", Path: `/stop$`, Status: 503})
	if _, err := e.c.Stop(ctx, sb.ID, nil); !errors.Is(err, daytona.ErrServer) || !daytona.IsTransient(err) {
		t.Errorf("stop under 503: %v", err)
	}
	remove()
	if n := e.Server.Requests()["POST /api/sandbox/{idOrName}/stop"]; n != 1 {
		t.Errorf("stop sent %d times", n)
	}
	// Latency alone just slows the call.
	e.Server.AddFault(emulator.Fault{Method: "GET", Path: `/user-home-dir$`, Latency: 50 * time.Millisecond, Times: 1})
	if _, err := tb.UserHomeDir(ctx); err != nil {
		t.Error(err)
	}
	e.noUnmatched(t)
}

func TestEmulatorErrorStatesAndRecovery(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	sb, _ := e.create(t, daytona.CreateParams{})
	if err := e.Server.SetError(sb.ID, "disk exploded", true); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.WaitUntilStarted(ctx, sb.ID, 10*time.Second)
	var se *daytona.SandboxStateError
	if !errors.As(err, &se) || se.Reason != "disk exploded" || !se.Recoverable || !errors.Is(err, daytona.ErrSandboxFailed) {
		t.Fatalf("wait on an errored sandbox: %v", err)
	}
	if _, err := e.c.Start(ctx, sb.ID); !errors.Is(err, daytona.ErrBadRequest) {
		t.Errorf("start of an errored sandbox: %v", err)
	}
	got, err := e.c.RecoverAndWait(ctx, sb.ID, 10*time.Second)
	if err != nil || got.State != daytona.StateStarted {
		t.Fatalf("RecoverAndWait = %v, %v", got, err)
	}
	// Stopped behind our back: the next refresh says so.
	if err := e.Server.StopBehindClientsBack(sb.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := e.c.Get(ctx, sb.ID); err != nil || got.State != daytona.StateStopped {
		t.Errorf("after auto-stop: %v, %v", got, err)
	}
	// Ephemeral: stop deletes it, and the stop-wait counts that as stopped.
	eph, _ := e.create(t, daytona.CreateParams{Ephemeral: true})
	got, err = e.c.StopAndWait(ctx, eph.ID, nil, 10*time.Second)
	if err != nil || got.State != daytona.StateDestroyed {
		t.Errorf("StopAndWait of an ephemeral sandbox = %v, %v", got, err)
	}
	// A wait that cannot finish in time.
	slow := startEnv(t, emulator.Options{StepDelay: 2 * time.Second, ReturnTransitional: true})
	created, err := slow.c.Create(ctx, daytona.CreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = slow.c.WaitUntilStarted(ctx, created.ID, 300*time.Millisecond)
	var wt *daytona.WaitTimeoutError
	if !errors.As(err, &wt) || !errors.Is(err, context.DeadlineExceeded) || wt.LastState != daytona.StateCreating {
		t.Errorf("short wait: %v", err)
	}
	e.noUnmatched(t)
}

func TestEmulatorSettersTTLSSHPreview(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	sb, _ := e.create(t, daytona.CreateParams{})
	if got, err := e.c.SetAutoStopInterval(ctx, sb.ID, 45); err != nil || got.AutoStopInterval != 45 {
		t.Errorf("auto-stop: %v, %v", got, err)
	}
	if got, err := e.c.SetAutoArchiveInterval(ctx, sb.ID, 120); err != nil || got.AutoArchiveInterval != 120 {
		t.Errorf("auto-archive: %v, %v", got, err)
	}
	if got, err := e.c.SetAutoDeleteInterval(ctx, sb.ID, -1); err != nil || got.AutoDeleteInterval != -1 {
		t.Errorf("auto-delete: %v, %v", got, err)
	}
	labels, err := e.c.ReplaceLabels(ctx, sb.ID, map[string]string{"only": "this"})
	if err != nil || len(labels) != 1 || labels["only"] != "this" {
		t.Errorf("labels: %v, %v", labels, err)
	}
	before := time.Now()
	got, err := e.c.SetTTL(ctx, sb.ID, 90)
	if err != nil {
		t.Fatal(err)
	}
	at, ok := got.AutoDestroyTime()
	if !ok || at.Before(before.Add(89*time.Minute)) || at.After(time.Now().Add(91*time.Minute)) {
		t.Errorf("autoDestroyAt = %q", got.AutoDestroyAt)
	}
	access, err := e.c.CreateSSHAccess(ctx, sb.ID, 30)
	if err != nil || access.Token == "" || !strings.Contains(access.SSHCommand, access.Token) {
		t.Fatalf("ssh: %+v, %v", access, err)
	}
	if err := e.c.RevokeSSHAccess(ctx, sb.ID, access.Token); err != nil {
		t.Errorf("revoke: %v", err)
	}
	if err := e.c.RevokeSSHAccess(ctx, sb.ID, ""); err != nil {
		t.Errorf("revoke all: %v", err)
	}
	link, err := e.c.PreviewLink(ctx, sb.ID, 3000)
	if err != nil || link.URL == "" || link.Token == "" {
		t.Errorf("preview: %+v, %v", link, err)
	}
	// The TTL destroys the sandbox once it passes.
	e.Server.AdvanceClock(91 * time.Minute)
	e.Server.Reap()
	if _, err := e.c.Get(ctx, sb.ID); !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("after the TTL: %v", err)
	}
	e.noUnmatched(t)
}

func TestEmulatorSnapshots(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: 20 * time.Millisecond})
	ctx := t.Context()
	sb, tb := e.create(t, daytona.CreateParams{})
	if err := tb.UploadFile(ctx, "marker.txt", strings.NewReader("from the snapshot")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateSnapshotFromSandboxAndWait(ctx, sb.ID, "snap-one", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	snap, err := e.c.GetSnapshot(ctx, "snap-one")
	if err != nil || snap.ID == "" || snap.Name != "snap-one" {
		t.Fatalf("GetSnapshot = %+v, %v", snap, err)
	}
	if snap.State != daytona.SnapshotActive {
		if _, err := waitSnapshotActive(ctx, e.c, "snap-one"); err != nil {
			t.Fatal(err)
		}
	}
	_, tb2 := e.create(t, daytona.CreateParams{Snapshot: "snap-one"})
	var buf bytes.Buffer
	if _, err := tb2.DownloadFile(ctx, "marker.txt", &buf); err != nil || buf.String() != "from the snapshot" {
		t.Errorf("file in the new sandbox: %q, %v", buf.String(), err)
	}
	if err := e.c.DeleteSnapshot(ctx, "snap-one"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.GetSnapshot(ctx, "snap-one"); !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if err := e.c.DeleteSnapshot(ctx, "snap-one"); !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	e.noUnmatched(t)
}

func waitSnapshotActive(ctx context.Context, c *daytona.Client, name string) (*daytona.Snapshot, error) {
	for {
		s, err := c.GetSnapshot(ctx, name)
		if err != nil || s.State == daytona.SnapshotActive {
			return s, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestEmulatorExecuteAndInfo(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	wd, err := tb.WorkDir(ctx)
	if err != nil || wd == "" {
		t.Fatal(wd, err)
	}
	home, err := tb.UserHomeDir(ctx)
	if err != nil || home == "" {
		t.Fatal(home, err)
	}
	if err := tb.CreateFolder(ctx, "sub", "750"); err != nil {
		t.Fatal(err)
	}
	res, err := tb.Execute(ctx, daytona.ExecuteRequest{
		Command: "pwd; echo \"$FOO\"; echo err >&2\nexit 3", Cwd: wd + "/sub", Env: map[string]string{"FOO": "bar"},
	})
	if err != nil || res.ExitCode != 3 || !strings.Contains(res.Result, wd+"/sub\nbar\n") || !strings.Contains(res.Result, "err") {
		t.Errorf("Execute = %+v, %v", res, err)
	}
	e.noUnmatched(t)
}

func TestEmulatorSessionsAndLogs(t *testing.T) {
	t.Parallel()
	splits := map[string]emulator.FrameSplitter{
		"inside-markers": emulator.SplitInsideMarkers(),
		"random":         emulator.SplitRandom(7, 5),
		"one-byte":       emulator.SplitEvery(1),
	}
	for name, split := range splits {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous, LogFrameSplit: split})
			ctx := t.Context()
			_, tb := e.create(t, daytona.CreateParams{})
			if err := tb.CreateSession(ctx, "main"); err != nil {
				t.Fatal(err)
			}
			// State persists between commands.
			if _, err := tb.SessionExec(ctx, "main", daytona.SessionExecRequest{Command: "export X=42; mkdir -p d && cd d"}); err != nil {
				t.Fatal(err)
			}
			sync, err := tb.SessionExec(ctx, "main", daytona.SessionExecRequest{Command: "echo $X; pwd; echo oops >&2"})
			if err != nil || sync.ExitCode == nil || *sync.ExitCode != 0 || !strings.HasPrefix(sync.Stdout, "42\n") ||
				!strings.HasSuffix(strings.TrimSpace(sync.Stdout), "/d") || sync.Stderr != "oops\n" {
				t.Fatalf("sync exec = %+v, %v", sync, err)
			}
			// A subshell: commands are sourced in the session shell, where a bare
			// `exit` would end the session itself (as on the real daemon).
			script := `(for i in $(seq 1 300); do echo "out $i"; echo "err $i" >&2; done; exit 5)`
			async, err := tb.SessionExec(ctx, "main", daytona.SessionExecRequest{Command: script, Async: true})
			if err != nil || async.CmdID == "" {
				t.Fatal(async, err)
			}
			var o, eb bytes.Buffer
			res, err := tb.FollowSessionCommandLogs(ctx, "main", async.CmdID, daytona.FollowOptions{Stdout: &o, Stderr: &eb})
			if err != nil || res.End != daytona.StreamClosed {
				t.Fatalf("follow = %+v, %v", res, err)
			}
			var wantOut, wantErr strings.Builder
			for i := 1; i <= 300; i++ {
				fmt.Fprintf(&wantOut, "out %d\n", i)
				fmt.Fprintf(&wantErr, "err %d\n", i)
			}
			if o.String() != wantOut.String() || eb.String() != wantErr.String() {
				t.Errorf("streams differ: %d/%d bytes, want %d/%d", o.Len(), eb.Len(), wantOut.Len(), wantErr.Len())
			}
			cmd, err := tb.GetSessionCommand(ctx, "main", async.CmdID)
			if err != nil || cmd.ExitCode == nil || *cmd.ExitCode != 5 {
				t.Errorf("command = %+v, %v", cmd, err)
			}
			logs, err := tb.SessionCommandLogs(ctx, "main", async.CmdID)
			if err != nil || logs.Stdout != wantOut.String() || logs.Stderr != wantErr.String() {
				t.Errorf("logs snapshot: %v", err)
			}
			// Stdin of an async command.
			reader, err := tb.SessionExec(ctx, "main", daytona.SessionExecRequest{Command: `read line; echo "got $line"`, Async: true})
			if err != nil {
				t.Fatal(err)
			}
			if running, err := tb.GetSessionCommand(ctx, "main", reader.CmdID); err != nil || running.ExitCode != nil {
				t.Fatalf("command waiting for stdin = %+v, %v", running, err)
			}
			if err := tb.SendSessionInput(ctx, "main", reader.CmdID, "hello"); err != nil {
				t.Fatal(err)
			}
			var ro bytes.Buffer
			if _, err := tb.FollowSessionCommandLogs(ctx, "main", reader.CmdID, daytona.FollowOptions{Stdout: &ro}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(ro.String(), "got hello") {
				t.Errorf("stdin round trip: %q", ro.String())
			}
			s, err := tb.GetSession(ctx, "main")
			if err != nil || len(s.Commands) != 4 {
				t.Errorf("session = %+v, %v", s, err)
			}
			list, err := tb.ListSessions(ctx)
			if err != nil || len(list) != 1 {
				t.Errorf("sessions = %+v, %v", list, err)
			}
			if err := tb.DeleteSession(ctx, "main"); err != nil {
				t.Fatal(err)
			}
			e.noUnmatched(t)
		})
	}
}

func TestEmulatorCommandRunningHasNoExitCode(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	if err := tb.CreateSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	r, err := tb.SessionExec(ctx, "s", daytona.SessionExecRequest{Command: "echo started; sleep 30", Async: true})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := tb.GetSessionCommand(ctx, "s", r.CmdID)
	if err != nil || cmd.ExitCode != nil {
		t.Errorf("running command = %+v, %v", cmd, err)
	}
	// Deleting the session ends the follow with a normal close. The first
	// output proves the follow is connected before the delete.
	done := make(chan error, 1)
	streaming := make(chan struct{})
	go func() {
		_, err := tb.FollowSessionCommandLogs(ctx, "s", r.CmdID, daytona.FollowOptions{Stdout: &signalWriter{ch: streaming}})
		done <- err
	}()
	select {
	case <-streaming:
	case err := <-done:
		t.Fatalf("follow ended early: %v", err)
	}
	if err := tb.DeleteSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("follow after session delete: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("follow did not end after the session was deleted")
	}
}

// signalWriter closes ch on its first write.
type signalWriter struct {
	ch   chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

func TestEmulatorLogStreamDropAndReconnect(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous, LogFrameSize: 100})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	if err := tb.CreateSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	r, err := tb.SessionExec(ctx, "s", daytona.SessionExecRequest{
		Command: `for i in $(seq 1 500); do echo "line $i"; echo "warn $i" >&2; done`})
	if err != nil {
		t.Fatal(err)
	}
	want, err := tb.SessionCommandLogs(ctx, "s", r.CmdID)
	if err != nil {
		t.Fatal(err)
	}
	// Cut the stream mid-frame (250 is not a multiple of the 100-byte frames,
	// and lands wherever it lands relative to the markers).
	for _, cut := range []int{250, 1001, 1002, 4097} {
		e.Server.AddFault(emulator.Fault{Path: `/logs$`, DropWebSocketAfterBytes: cut, Times: 1})
		var o, se bytes.Buffer
		res, err := tb.FollowSessionCommandLogs(ctx, "s", r.CmdID, daytona.FollowOptions{Stdout: &o, Stderr: &se, MaxReconnects: 3})
		if err != nil || res.Reconnects != 1 || res.End != daytona.StreamClosed {
			t.Fatalf("cut at %d: %+v, %v", cut, res, err)
		}
		if o.String() != want.Stdout || se.String() != want.Stderr {
			t.Fatalf("cut at %d: output differs after reconnect (%d/%d vs %d/%d bytes)", cut, o.Len(), se.Len(), len(want.Stdout), len(want.Stderr))
		}
	}
	// Without reconnects the drop is reported, and a manual resume from the
	// reported offsets completes the streams exactly.
	e.Server.AddFault(emulator.Fault{Path: `/logs$`, DropWebSocketAfterBytes: 3333, Times: 1})
	var o, se bytes.Buffer
	res, err := tb.FollowSessionCommandLogs(ctx, "s", r.CmdID, daytona.FollowOptions{Stdout: &o, Stderr: &se})
	if !errors.Is(err, daytona.ErrStreamDropped) || res.End != daytona.StreamDropped || !daytona.IsTransient(err) {
		t.Fatalf("drop: %+v, %v", res, err)
	}
	if _, err := tb.FollowSessionCommandLogs(ctx, "s", r.CmdID, daytona.FollowOptions{Stdout: &o, Stderr: &se,
		SkipStdout: res.StdoutBytes, SkipStderr: res.StderrBytes}); err != nil {
		t.Fatal(err)
	}
	if o.String() != want.Stdout || se.String() != want.Stderr {
		t.Errorf("manual resume: output differs")
	}
	e.noUnmatched(t)
}

func TestEmulatorFiles(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	wd, _ := tb.WorkDir(ctx)
	if err := tb.CreateFolder(ctx, "tree/deep", "700"); err != nil {
		t.Fatal(err)
	}
	fi, err := tb.FileInfo(ctx, "tree/deep")
	if err != nil || !fi.IsDir || fi.Permissions != "0700" {
		t.Errorf("folder info = %+v, %v", fi, err)
	}
	ups, err := tb.UploadFiles(ctx, []daytona.Upload{
		{Path: "tree/a.txt", Reader: strings.NewReader("alpha")},
		{Path: wd + "/tree/new/b.bin", Reader: daytona.NewPatternReader(300 << 10)},
		{Path: "tree/empty", Reader: strings.NewReader("")},
	})
	if err != nil || len(ups) != 3 {
		t.Fatalf("UploadFiles = %+v, %v", ups, err)
	}
	if err := tb.UploadFile(ctx, "tree/single.txt", strings.NewReader("one")); err != nil {
		t.Fatal(err)
	}
	list, err := tb.ListFiles(ctx, "tree")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a.txt", "deep", "empty", "new", "single.txt"}) {
		t.Errorf("list = %v", names)
	}
	if err := tb.SetFilePermissions(ctx, "tree/a.txt", daytona.Permissions{Mode: "600"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := tb.FileInfo(ctx, "tree/a.txt"); err != nil || fi.Permissions != "0600" || fi.Size != 5 {
		t.Errorf("after chmod = %+v, %v", fi, err)
	}
	if err := tb.MoveFile(ctx, "tree/a.txt", "tree/moved.txt"); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var a, single bytes.Buffer
	res, err := tb.DownloadFiles(ctx, []daytona.Download{
		{Path: "tree/moved.txt", Writer: &a},
		{Path: "tree/new/b.bin", Writer: h},
		{Path: "tree/a.txt", Writer: io.Discard}, // moved away
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || a.String() != "alpha" {
		t.Errorf("moved.txt: %+v %q", res[0], a.String())
	}
	if res[1].Err != nil || res[1].Bytes != 300<<10 || !bytes.Equal(h.Sum(nil), daytona.PatternHash(300<<10)) {
		t.Errorf("b.bin: %+v", res[1])
	}
	if !errors.Is(res[2].Err, daytona.ErrNotFound) {
		t.Errorf("missing file: %+v", res[2])
	}
	if n, err := tb.DownloadFile(ctx, "tree/single.txt", &single); err != nil || n != 3 || single.String() != "one" {
		t.Errorf("DownloadFile = %d %q %v", n, single.String(), err)
	}
	if err := tb.DeleteFile(ctx, "tree", false); !errors.Is(err, daytona.ErrBadRequest) {
		t.Errorf("non-recursive delete of a directory: %v", err)
	}
	if err := tb.DeleteFile(ctx, "tree", true); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.FileInfo(ctx, "tree"); !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	e.noUnmatched(t)
}

// heapPeak samples the live heap until stopped and reports the peak.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak.Load()
	}
}

func liveHeap() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// A 64 MiB file goes up from a generating reader and comes back into a
// hashing writer; the heap never grows by anything close to the file size
// (client and emulator share this process, so this bounds both).
func TestEmulatorLargeTransferFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB transfer")
	}
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	const size = 64 << 20
	const bound = 24 << 20
	base := liveHeap()
	stop := heapPeak()
	ups, err := tb.UploadFiles(ctx, []daytona.Upload{{Path: "big.bin", Reader: daytona.NewPatternReader(size)}})
	upPeak := stop()
	if err != nil || len(ups) != 1 || ups[0].Bytes != size {
		t.Fatalf("upload = %+v, %v", ups, err)
	}
	h := sha256.New()
	stop = heapPeak()
	res, err := tb.DownloadFiles(ctx, []daytona.Download{{Path: "big.bin", Writer: h}})
	downPeak := stop()
	if err != nil || res[0].Err != nil || res[0].Bytes != size {
		t.Fatalf("download = %+v, %v", res, err)
	}
	if !bytes.Equal(h.Sum(nil), daytona.PatternHash(size)) {
		t.Fatal("downloaded content differs")
	}
	h.Reset()
	if n, err := tb.DownloadFile(ctx, "big.bin", h); err != nil || n != size || !bytes.Equal(h.Sum(nil), daytona.PatternHash(size)) {
		t.Fatalf("DownloadFile = %d, %v", n, err)
	}
	t.Logf("heap growth: upload %d KiB, download %d KiB (file %d KiB)", sat(upPeak, base)>>10, sat(downPeak, base)>>10, size>>10)
	if sat(upPeak, base) > bound || sat(downPeak, base) > bound {
		t.Errorf("heap grew by %d / %d bytes during a %d-byte transfer; something buffers whole files", sat(upPeak, base), sat(downPeak, base), size)
	}
}

func sat(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func TestEmulatorPty(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	wd, _ := tb.WorkDir(ctx)
	id, err := tb.CreatePty(ctx, daytona.PtyCreateRequest{ID: "term", Cwd: wd, Envs: map[string]string{"PTY_VAR": "from-create"},
		Cols: 120, Rows: 40, LazyStart: true})
	if err != nil || id != "term" {
		t.Fatal(id, err)
	}
	if _, err := tb.CreatePty(ctx, daytona.PtyCreateRequest{ID: "term"}); !errors.Is(err, daytona.ErrConflict) {
		t.Errorf("duplicate PTY: %v", err)
	}
	var out daytona.SyncBuffer
	h, err := tb.ConnectPty(ctx, "term", daytona.PtyConnectOptions{Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.SendInput(ctx, []byte("echo marker-$PTY_VAR; stty size\n")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "echo output", func() bool { return strings.Contains(out.String(), "marker-from-create") })
	testutil.WaitFor(t, "initial size", func() bool { return strings.Contains(out.String(), "40 120") })
	info, err := h.Resize(ctx, 100, 30)
	if err != nil || info.Cols != 100 || info.Rows != 30 {
		t.Fatalf("Resize = %+v, %v", info, err)
	}
	// Ask until the shell reports the new size: an interactive bash busy
	// with its prompt can answer a typed-ahead line with the old one.
	for i := 0; !strings.Contains(out.String(), "30 100"); i++ {
		if i == 20 {
			t.Fatalf("never saw the new size in %q", out.String())
		}
		stale := strings.Count(out.String(), "40 120")
		if err := h.SendInput(ctx, []byte("stty size\n")); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "an answer to stty size", func() bool {
			o := out.String()
			return strings.Contains(o, "30 100") || strings.Count(o, "40 120") > stale
		})
	}
	got, err := tb.GetPty(ctx, "term")
	if err != nil || got.Cols != 100 || !got.Active {
		t.Errorf("GetPty = %+v, %v", got, err)
	}
	if err := h.SendInput(ctx, []byte("exit 3\n")); err != nil {
		t.Fatal(err)
	}
	exit, err := h.Wait(ctx)
	if err != nil || exit.ExitCode == nil || *exit.ExitCode != 3 || exit.CloseCode != 1011 {
		t.Fatalf("Wait = %+v, %v", exit, err)
	}
	if _, err := tb.ResizePty(ctx, "term", 80, 24); !errors.Is(err, daytona.ErrGone) && !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("resize of an exited PTY: %v", err)
	}

	// exit 0 → close 1000.
	if _, err := tb.CreatePty(ctx, daytona.PtyCreateRequest{ID: "zero", LazyStart: true}); err != nil {
		t.Fatal(err)
	}
	hz, err := tb.ConnectPty(ctx, "zero", daytona.PtyConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hz.Close()
	_ = hz.SendInput(ctx, []byte("exit\n"))
	if exit, err := hz.Wait(ctx); err != nil || exit.ExitCode == nil || *exit.ExitCode != 0 {
		t.Errorf("exit 0: %+v, %v", exit, err)
	}

	// Kill → 137 SIGKILL.
	if _, err := tb.CreatePty(ctx, daytona.PtyCreateRequest{ID: "victim"}); err != nil {
		t.Fatal(err)
	}
	hv, err := tb.ConnectPty(ctx, "victim", daytona.PtyConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hv.Close()
	if list, err := tb.ListPty(ctx); err != nil || len(list) == 0 {
		t.Errorf("ListPty = %v, %v", list, err)
	}
	if err := hv.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	exit, err = hv.Wait(ctx)
	if err != nil || exit.ExitCode == nil || *exit.ExitCode != 137 || exit.ExitReason != "SIGKILL" {
		t.Errorf("killed: %+v, %v", exit, err)
	}

	// Unknown session: refused with the control error.
	if _, err := tb.ConnectPty(ctx, "ghost", daytona.PtyConnectOptions{}); !errors.Is(err, daytona.ErrNotFound) {
		t.Errorf("connect to unknown PTY: %v", err)
	}

	// A transport drop is told apart from an exit.
	if _, err := tb.CreatePty(ctx, daytona.PtyCreateRequest{ID: "dropper", LazyStart: true}); err != nil {
		t.Fatal(err)
	}
	e.Server.AddFault(emulator.Fault{Path: `/process/pty/dropper/connect$`, DropWebSocketAfterBytes: 200, Times: 1})
	hd, err := tb.ConnectPty(ctx, "dropper", daytona.PtyConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	_ = hd.SendInput(ctx, []byte("for i in $(seq 1 100); do echo lots of output $i; done\n"))
	if exit, err := hd.Wait(ctx); !errors.Is(err, daytona.ErrStreamDropped) || exit != nil {
		t.Errorf("dropped PTY: %+v, %v", exit, err)
	}
	// Disconnecting does not kill the process: reconnect and finish.
	hd2, err := tb.ConnectPty(ctx, "dropper", daytona.PtyConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hd2.Close()
	_ = hd2.SendInput(ctx, []byte("exit 4\n"))
	if exit, err := hd2.Wait(ctx); err != nil || exit.ExitCode == nil || *exit.ExitCode != 4 {
		t.Errorf("reconnected PTY: %+v, %v", exit, err)
	}
	e.noUnmatched(t)
}

// headerRecorder checks the headers of every request the client sends,
// WebSocket handshakes included.
type headerRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	bad   []string
	count int
	ws    int
}

func (h *headerRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.count++
	if r.Header.Get("Upgrade") == "websocket" {
		h.ws++
	}
	if r.Header.Get("Authorization") != "Bearer "+emulator.DevAPIKey ||
		r.Header.Get("X-Daytona-Source") != "daytona-worker-test" ||
		r.Header.Get("X-Daytona-SDK-Version") != daytona.DefaultSDKVersion {
		h.bad = append(h.bad, r.Method+" "+r.URL.Path)
	}
	h.mu.Unlock()
	return h.next.RoundTrip(r)
}

func TestEmulatorHeadersEverywhere(t *testing.T) {
	t.Parallel()
	rec := &headerRecorder{}
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous}, func(cfg *daytona.Config) {
		rec.next = cfg.HTTPClient.Transport
		cfg.HTTPClient = &http.Client{Transport: rec}
	})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	if err := tb.CreateSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	r, err := tb.SessionExec(ctx, "s", daytona.SessionExecRequest{Command: "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.FollowSessionCommandLogs(ctx, "s", r.CmdID, daytona.FollowOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.CreatePty(ctx, daytona.PtyCreateRequest{ID: "p", LazyStart: true}); err != nil {
		t.Fatal(err)
	}
	h, err := tb.ConnectPty(ctx, "p", daytona.PtyConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bad) > 0 || rec.ws != 2 || rec.count < 6 {
		t.Errorf("bad headers on %v; %d requests, %d WebSocket handshakes", rec.bad, rec.count, rec.ws)
	}
}

// TestEmulatorLongExchangesHoldNoRequestSlot: with one request slot per host,
// a followed log stream, a streamed download and a streamed upload each wait
// on a short request made while they are open. Each would deadlock if it
// held the slot; each short request has 30 s to fail instead of hanging.
func TestEmulatorLongExchangesHoldNoRequestSlot(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous}, func(c *daytona.Config) {
		c.HTTPClient = daytona.NewHTTPClient()
		c.Queue = daytona.NewRequestQueue(1)
	})
	ctx := t.Context()
	_, tb := e.create(t, daytona.CreateParams{})
	short := func() error {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := tb.WorkDir(sctx)
		return err
	}

	t.Run("log stream", func(t *testing.T) {
		if err := tb.CreateSession(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		prepared := tb.PrepareLogStream(ctx)
		defer prepared.Close()
		r, err := tb.SessionExec(ctx, "s", daytona.SessionExecRequest{Command: `echo waiting; read line; echo "got $line"`, Async: true, SuppressInputEcho: true})
		if err != nil {
			t.Fatal(err)
		}
		streaming := make(chan struct{})
		var out syncWriter
		out.w = &signalWriter{ch: streaming}
		done := make(chan error, 1)
		go func() {
			_, err := tb.FollowSessionCommandLogs(ctx, "s", r.CmdID, daytona.FollowOptions{Stdout: &out, Prepared: prepared})
			done <- err
		}()
		select {
		case <-streaming:
		case err := <-done:
			t.Fatalf("follow ended early: %v", err)
		}
		// The stream is open; short requests still get through.
		if err := short(); err != nil {
			t.Fatalf("a short request while a log stream is open: %v", err)
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := tb.SendSessionInput(sctx, "s", r.CmdID, "x"); err != nil {
			t.Fatalf("input while a log stream is open: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != "waiting\ngot x\n" {
			t.Errorf("stream = %q", got)
		}
	})

	t.Run("download", func(t *testing.T) {
		if err := tb.UploadFile(ctx, "big.bin", daytona.NewPatternReader(4<<20)); err != nil {
			t.Fatal(err)
		}
		var shortErr error
		var once sync.Once
		n, err := tb.DownloadFile(ctx, "big.bin", writerFunc(func(p []byte) (int, error) {
			once.Do(func() { shortErr = short() })
			return len(p), nil
		}))
		if err != nil || n != 4<<20 {
			t.Fatalf("download: %d bytes, %v", n, err)
		}
		if shortErr != nil {
			t.Fatalf("a short request while a download streams: %v", shortErr)
		}
	})

	t.Run("upload", func(t *testing.T) {
		var shortErr error
		var once sync.Once
		src := io.MultiReader(readerFunc(func(p []byte) (int, error) {
			once.Do(func() { shortErr = short() })
			return 0, io.EOF
		}), strings.NewReader("payload"))
		if err := tb.UploadFile(ctx, "up.txt", src); err != nil {
			t.Fatal(err)
		}
		if shortErr != nil {
			t.Fatalf("a short request while an upload streams: %v", shortErr)
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// syncWriter is a writer whose contents can be read while it is written.
type syncWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// The daemon reads an execute's timeout as a uint32 of seconds and refuses
// a body beyond it (as the emulator does); the client sends a longer one as
// the most it takes, so the command runs instead of failing, or timing out
// at once on an overflowed timer.
func TestExecuteTimeoutBeyondTheDaemonsRangeIsSentAsItsMost(t *testing.T) {
	t.Parallel()
	e := startEnv(t, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := t.Context()
	sb, tb := e.create(t, daytona.CreateParams{})
	for _, secs := range []float64{1e17, 4294967296, 4294967295} {
		e.Server.ResetJournal(sb.ID)
		res, err := tb.Execute(ctx, daytona.ExecuteRequest{Command: "echo ran", TimeoutSeconds: secs})
		if err != nil || res.ExitCode != 0 || res.Result != "ran\n" {
			t.Fatalf("%g s: %+v, %v", secs, res, err)
		}
		if j := e.Server.Journal(sb.ID); len(j) != 1 || j[0].Timeout != math.MaxUint32 {
			t.Errorf("%g s: journal %+v, want a timeout of %d", secs, j, uint32(math.MaxUint32))
		}
	}
	// A body with more is refused, as the daemon's decode refuses it.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.ToolboxURL(sb.ID)+"/process/execute",
		strings.NewReader(`{"command":"echo no","timeout":4294967296}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a timeout past uint32: %d, want 400", resp.StatusCode)
	}
}
