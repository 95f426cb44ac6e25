package daytona

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

func TestCreateBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		target string
		p      CreateParams
		want   string
	}{
		{name: "image with resources and language", target: "eu",
			p: CreateParams{Name: "n", Image: "node:22", Language: "python", Labels: map[string]string{"a": "b"},
				Resources: &Resources{CPU: testutil.Ptr(2.0), Memory: testutil.Ptr(4.0), Disk: testutil.Ptr(10.0), GPU: testutil.Ptr(1.0)}, AutoStopInterval: testutil.Ptr(0.0),
				AutoArchiveInterval: testutil.Ptr(60.0), AutoDeleteInterval: testutil.Ptr(-1.0), Env: map[string]string{"K": "V"}},
			want: `{"name":"n","env":{"K":"V"},"labels":{"a":"b","code-toolbox-language":"python"},"target":"eu",
				"cpu":2,"gpu":1,"memory":4,"disk":10,"autoStopInterval":0,"autoArchiveInterval":60,"autoDeleteInterval":-1,
				"buildInfo":{"dockerfileContent":"FROM node:22\n"}}`},
		{name: "snapshot, ephemeral, per-call target", target: "us",
			p:    CreateParams{Snapshot: "daytona-small", Ephemeral: true, Target: "eu", TTLMinutes: testutil.Ptr(30), User: "root", Public: true},
			want: `{"snapshot":"daytona-small","user":"root","env":{},"labels":{"code-toolbox-language":"python"},"public":true,"target":"eu","autoDeleteInterval":0,"ttlMinutes":30}`},
		// Resources go as the numbers they are: a fraction, a zero.
		{name: "fractional and zero resources", p: CreateParams{Image: "a", Resources: &Resources{CPU: testutil.Ptr(0.5), Disk: testutil.Ptr(0.0), Memory: testutil.Ptr(1e-7)}},
			want: `{"env":{},"labels":{"code-toolbox-language":"python"},"cpu":0.5,"memory":1e-7,"disk":0,"buildInfo":{"dockerfileContent":"FROM a\n"}}`},
		// Intervals go as the numbers they are, however large (Daytona refuses what it cannot hold).
		{name: "intervals beyond int", p: CreateParams{AutoStopInterval: testutil.Ptr(1e20), AutoDeleteInterval: testutil.Ptr(-1e20)},
			want: `{"env":{},"labels":{"code-toolbox-language":"python"},"autoStopInterval":1e20,"autoDeleteInterval":-1e20}`},
		// The SDK labels every sandbox with its code-toolbox language, python by default.
		{name: "defaults", want: `{"env":{},"labels":{"code-toolbox-language":"python"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, srv, _ := setup(t, func(cfg *Config) { cfg.Target = tt.target })
			mux.HandleFunc("POST /sandbox", func(w http.ResponseWriter, r *http.Request) {
				testHeader(t, r, "Content-Type", "application/json")
				testJSONBody(t, r, tt.want)
				writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarted))
			})
			sb, err := c.Create(t.Context(), tt.p)
			if err != nil || sb.ID != "sb" {
				t.Fatalf("Create = %+v, %v", sb, err)
			}
		})
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	c, _, _, _ := setup(t)
	for _, p := range []CreateParams{
		{Image: "a", Snapshot: "b"},
		{Snapshot: "s", Resources: &Resources{CPU: testutil.Ptr(2.0)}},
		{AutoStopInterval: testutil.Ptr(-1.0)},
		{AutoArchiveInterval: testutil.Ptr(-5.0)},
		{AutoStopInterval: testutil.Ptr(1.5)},
		{TTLMinutes: testutil.Ptr(-1)},
		{Language: "cobol"},
	} {
		if _, err := c.Create(t.Context(), p); err == nil {
			t.Errorf("Create(%+v) succeeded", p)
		}
	}
}

// lifecycleServer scripts GET /sandbox/sb answers: states in turn, then the
// last one forever. "404" answers not found.
func lifecycleServer(t *testing.T, mux *http.ServeMux, srvURL func(string, SandboxState) map[string]any, states ...SandboxState) *atomic.Int32 {
	var polls atomic.Int32
	mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
		n := int(polls.Add(1)) - 1
		s := states[min(n, len(states)-1)]
		if s == "404" {
			writeJSON(w, 404, map[string]any{"statusCode": 404, "message": "Sandbox with ID or name sb not found"})
			return
		}
		body := srvURL("sb", s)
		if s.Failed() {
			body["errorReason"] = "disk full"
			body["recoverable"] = true
		}
		writeJSON(w, 200, body)
	})
	return &polls
}

func TestCreateAndWaitPolls(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	mk := func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }
	mux.HandleFunc("POST /sandbox", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, mk("sb", StateCreating))
	})
	polls := lifecycleServer(t, mux, mk, StateCreating, StatePullingSnapshot, StateStarting, StateStarted)
	sb, err := c.CreateAndWait(t.Context(), CreateParams{}, time.Minute)
	if err != nil || sb.State != StateStarted {
		t.Fatalf("CreateAndWait = %v, %v", sb, err)
	}
	if polls.Load() != 4 {
		t.Errorf("polls = %d", polls.Load())
	}
	want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	if got := clock.Sleeps(); !slices.Equal(got, want) {
		t.Errorf("sleeps = %v, want %v", got, want)
	}
}

func TestWaitCadence(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	mk := func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }
	lifecycleServer(t, mux, mk, StateStarting)
	_, err := c.WaitUntilStarted(t.Context(), "sb", 8*time.Second)
	var wt *WaitTimeoutError
	if !errors.As(err, &wt) || !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if wt.LastState != StateStarting {
		t.Errorf("timeout error = %v", err)
	}
	sleeps := clock.Sleeps()
	// 100 ms steps for the first 5 s (51 polls take it past 5 s), then ×1.1.
	for i, d := range sleeps {
		switch {
		case i <= 50 && d != 100*time.Millisecond:
			t.Fatalf("sleep %d = %v, want 100ms", i, d)
		case i > 50 && i < len(sleeps)-1:
			prev := sleeps[i-1]
			want := min(time.Duration(float64(prev)*1.1), time.Second)
			if d != want {
				t.Fatalf("sleep %d = %v, want %v", i, d, want)
			}
		}
	}
	var total time.Duration
	for _, d := range sleeps {
		total += d
	}
	if total != 8*time.Second {
		t.Errorf("waited %v in total, want exactly the 8s timeout", total)
	}
}

func TestWaitCapsAtOneSecond(t *testing.T) {
	t.Parallel()
	c, mux, srv, clock := setup(t)
	lifecycleServer(t, mux, func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }, StateStarting)
	_, _ = c.WaitUntilStarted(t.Context(), "sb", 40*time.Second)
	sleeps := clock.Sleeps()
	if got := slices.Max(sleeps); got != time.Second {
		t.Errorf("longest poll interval = %v, want 1s", got)
	}
}

func TestWaitFailureStates(t *testing.T) {
	t.Parallel()
	for _, failed := range []SandboxState{StateError, StateBuildFailed} {
		c, mux, srv, _ := setup(t)
		lifecycleServer(t, mux, func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }, StateStarting, failed)
		sb, err := c.WaitUntilStarted(t.Context(), "sb", time.Minute)
		var se *SandboxStateError
		if !errors.As(err, &se) || !errors.Is(err, ErrSandboxFailed) || se.Reason != "disk full" || !se.Recoverable || se.State != failed {
			t.Fatalf("err = %v", err)
		}
		if sb == nil || sb.State != failed {
			t.Errorf("sandbox = %+v", sb)
		}
		if !strings.Contains(err.Error(), "disk full") {
			t.Errorf("message = %q", err)
		}
	}
}

func TestStopAndWaitTreats404AsStopped(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("POST /sandbox/sb/stop", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("force") != "true" {
			t.Errorf("force = %q", r.URL.Query().Get("force"))
		}
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateStopping))
	})
	lifecycleServer(t, mux, func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }, StateStopping, "404")
	sb, err := c.StopAndWait(t.Context(), "sb", &StopOptions{Force: true}, time.Minute)
	if err != nil || sb.State != StateDestroyed {
		t.Fatalf("StopAndWait = %+v, %v", sb, err)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	lifecycleServer(t, mux, func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }, StateStarting)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := c.WaitUntilStarted(ctx, "sb", 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestDeleteAndWait(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("DELETE /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			t.Errorf("delete sends query %q; the npm client sends none", r.URL.RawQuery)
		}
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateDestroying))
	})
	polls := lifecycleServer(t, mux, func(id string, s SandboxState) map[string]any { return sandboxJSON(srv, id, s) }, StateDestroying, "404")
	if err := c.DeleteAndWait(t.Context(), "sb", time.Minute); err != nil {
		t.Fatal(err)
	}
	if polls.Load() != 2 {
		t.Errorf("polls = %d", polls.Load())
	}
}

func TestListAndIterate(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("GET /sandbox", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("labels") != `{"env":"dev","team":"x"}` {
			t.Errorf("labels = %q", q.Get("labels"))
		}
		if !slices.Equal(q["states"], []string{"started", "stopped"}) {
			t.Errorf("states = %q", q["states"])
		}
		if q.Get("limit") != "2" {
			t.Errorf("limit = %q", q.Get("limit"))
		}
		switch q.Get("cursor") {
		case "":
			writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON(srv, "a", StateStarted), sandboxJSON(srv, "b", StateStopped)}, "nextCursor": "c1"})
		case "c1":
			// An empty page with a cursor means: keep going.
			writeJSON(w, 200, map[string]any{"items": []any{}, "nextCursor": "c2"})
		case "c2":
			writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON(srv, "c", StateStarted)}, "nextCursor": nil})
		default:
			t.Errorf("cursor %q", q.Get("cursor"))
		}
	})
	opts := &ListOptions{Labels: map[string]string{"team": "x", "env": "dev"}, States: []SandboxState{StateStarted, StateStopped}, Limit: 2}
	var ids []string
	for sb, err := range c.ListAll(t.Context(), opts) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	if !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Errorf("ids = %v", ids)
	}
	if opts.Cursor != "" {
		t.Error("ListAll mutated the caller's options")
	}
	page, err := c.List(t.Context(), opts)
	if err != nil || len(page.Items) != 2 || page.NextCursor != "c1" {
		t.Errorf("List = %+v, %v", page, err)
	}
}

func TestListAllRepeatedCursor(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	mux.HandleFunc("GET /sandbox", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"items": []any{sandboxJSON(srv, "a", StateStarted)}, "nextCursor": "same"})
	})
	n := 0
	var last error
	for _, err := range c.ListAll(t.Context(), nil) {
		n++
		last = err
	}
	if last == nil || n > 4 {
		t.Errorf("n = %d, last err = %v", n, last)
	}
}

func TestSetTTLReadsBackAutoDestroyAt(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	var ttlSet atomic.Bool
	mux.HandleFunc("POST /sandbox/sb/ttl/{m}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("m") != "90" {
			t.Errorf("ttl = %s", r.PathValue("m"))
		}
		ttlSet.Store(true)
		w.WriteHeader(201)
	})
	mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
		body := sandboxJSON(srv, "sb", StateStarted)
		if ttlSet.Load() {
			body["autoDestroyAt"] = "2026-01-02T04:34:05.000Z"
		}
		writeJSON(w, 200, body)
	})
	sb, err := c.SetTTL(t.Context(), "sb", 90)
	if err != nil {
		t.Fatal(err)
	}
	at, ok := sb.AutoDestroyTime()
	if !ok || !at.Equal(time.Date(2026, 1, 2, 4, 34, 5, 0, time.UTC)) {
		t.Errorf("AutoDestroyTime = %v, %v", at, ok)
	}
}

func TestIntervalsAcceptEmpty201(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	for _, kind := range []string{"autostop", "autoarchive", "autodelete"} {
		mux.HandleFunc("POST /sandbox/sb/"+kind+"/{n}", func(w http.ResponseWriter, r *http.Request) {
			if kind == "autostop" {
				writeJSON(w, 201, sandboxJSON(srv, "sb", StateStarted))
				return
			}
			w.WriteHeader(201)
		})
	}
	mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateStarted))
	})
	ctx := t.Context()
	if _, err := c.SetAutoStopInterval(ctx, "sb", 0); err != nil {
		t.Error(err)
	}
	if _, err := c.SetAutoArchiveInterval(ctx, "sb", 60); err != nil {
		t.Error(err)
	}
	if sb, err := c.SetAutoDeleteInterval(ctx, "sb", -1); err != nil || sb.ID != "sb" {
		t.Error(sb, err)
	}
	if _, err := c.SetAutoStopInterval(ctx, "sb", -1); err == nil {
		t.Error("negative auto-stop accepted")
	}
}

func TestLabelsSSHPreview(t *testing.T) {
	t.Parallel()
	c, mux, _, _ := setup(t)
	mux.HandleFunc("PUT /sandbox/sb/labels", func(w http.ResponseWriter, r *http.Request) {
		testJSONBody(t, r, `{"labels":{"k":"v"}}`)
		writeJSON(w, 200, map[string]any{"labels": map[string]string{"k": "v"}})
	})
	mux.HandleFunc("POST /sandbox/sb/ssh-access", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("expiresInMinutes") != "15" {
			t.Errorf("expiresInMinutes = %q", r.URL.Query().Get("expiresInMinutes"))
		}
		writeJSON(w, 200, map[string]any{"id": "a1", "sandboxId": "sb", "token": "tok123", "sshCommand": "ssh tok123@ssh.app.daytona.io"})
	})
	mux.HandleFunc("GET /sandbox/sb/ports/3000/preview-url", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"sandboxId": "sb", "url": "https://3000-sb.proxy", "token": "ptok"})
	})
	labels, err := c.ReplaceLabels(t.Context(), "sb", map[string]string{"k": "v"})
	if err != nil || labels["k"] != "v" {
		t.Fatal(labels, err)
	}
	a, err := c.CreateSSHAccess(t.Context(), "sb", 15)
	if err != nil || a.Token != "tok123" || a.SSHCommand == "" {
		t.Fatal(a, err)
	}
	if strings.Contains(a.String(), "tok123") {
		t.Error("SSHAccess.String leaks the token")
	}
	p, err := c.PreviewLink(t.Context(), "sb", 3000)
	if err != nil || p.Token != "ptok" || p.URL == "" {
		t.Fatal(p, err)
	}
	if strings.Contains(p.String(), "ptok") {
		t.Error("PreviewLink.String leaks the token")
	}
	if _, err := c.PreviewLink(t.Context(), "sb", 0); err == nil {
		t.Error("port 0 accepted")
	}
}

func TestSnapshots(t *testing.T) {
	t.Parallel()
	c, mux, srv, _ := setup(t)
	const uuid = "3f1c0000-0000-4000-8000-000000000001"
	mux.HandleFunc("GET /snapshots/{ref}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ref") != "my-snap" && r.PathValue("ref") != uuid {
			writeJSON(w, 404, map[string]any{"message": "Snapshot not found"})
			return
		}
		writeJSON(w, 200, map[string]any{"id": uuid, "name": "my-snap", "state": "active", "mem": 1, "size": nil, "entrypoint": nil})
	})
	var deleted atomic.Value
	mux.HandleFunc("DELETE /snapshots/{id}", func(w http.ResponseWriter, r *http.Request) {
		deleted.Store(r.PathValue("id"))
	})
	var snapState atomic.Int32
	mux.HandleFunc("POST /sandbox/sb/snapshot", func(w http.ResponseWriter, r *http.Request) {
		testJSONBody(t, r, `{"name":"my-snap"}`)
		writeJSON(w, 200, sandboxJSON(srv, "sb", StateSnapshotting))
	})
	mux.HandleFunc("GET /sandbox/sb", func(w http.ResponseWriter, r *http.Request) {
		s := StateSnapshotting
		if snapState.Add(1) > 2 {
			s = StateStarted
		}
		writeJSON(w, 200, sandboxJSON(srv, "sb", s))
	})
	sb, err := c.CreateSnapshotFromSandboxAndWait(t.Context(), "sb", "my-snap", time.Minute)
	if err != nil || sb.State != StateStarted {
		t.Fatal(sb, err)
	}
	s, err := c.GetSnapshot(t.Context(), "my-snap")
	if err != nil || s.ID != uuid || s.State != SnapshotActive {
		t.Fatal(s, err)
	}
	if err := c.DeleteSnapshot(t.Context(), "my-snap"); err != nil {
		t.Fatal(err)
	}
	if deleted.Load() != uuid {
		t.Errorf("deleted %v, want the UUID", deleted.Load())
	}
	if err := c.DeleteSnapshot(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("err = %v", err)
	}
}
