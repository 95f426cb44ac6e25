package emulator_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/testutil"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	sb := c.create(nil)
	id := sb["id"].(string)
	preview := c.api("GET", "/sandbox/"+id+"/ports/1/preview-url", nil).obj(t)["token"].(string)

	tests := []struct {
		name    string
		key     string
		url     string
		header  http.Header
		status  int
		message string
		code    string
	}{
		{name: "api without key", url: env.APIURL + "/sandbox", status: 401, message: "Invalid credentials"},
		{name: "api wrong key", key: "nope", url: env.APIURL + "/sandbox", status: 401, message: "Invalid credentials"},
		{name: "api right key", key: env.APIKey, url: env.APIURL + "/sandbox", status: 200},
		{name: "config is public", url: env.APIURL + "/config", status: 200},
		{name: "toolbox without key", url: env.ToolboxURL(id) + "/work-dir", status: 401,
			message: "unauthorized: authentication failed: Bearer token is invalid", code: "UNAUTHORIZED"},
		{name: "toolbox preview token header", url: env.ToolboxURL(id) + "/work-dir",
			header: http.Header{"X-Daytona-Preview-Token": {preview}}, status: 200},
		{name: "toolbox preview token query", url: env.ToolboxURL(id) + "/work-dir?DAYTONA_SANDBOX_AUTH_KEY=" + preview, status: 200},
		{name: "toolbox wrong preview token", url: env.ToolboxURL(id) + "/work-dir",
			header: http.Header{"X-Daytona-Preview-Token": {"bad"}}, status: 401, code: "UNAUTHORIZED"},
		{name: "admin without key", url: env.HTTP.URL + "/_emulator/sandboxes", status: 401, message: "Invalid credentials"},
		{name: "admin with key", key: env.APIKey, url: env.HTTP.URL + "/_emulator/sandboxes", status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := *c
			cl.t, cl.key = t, tt.key
			r, err := cl.req(t.Context(), "GET", tt.url, nil, tt.header)
			require.NoError(t, err)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			if tt.status == 401 {
				body := r.obj(t)
				assert.EqualValues(t, 401, body["statusCode"])
				if tt.message != "" {
					assert.Equal(t, tt.message, body["message"])
				}
				if tt.code != "" {
					assert.Equal(t, tt.code, body["code"])
				} else {
					assert.Equal(t, "Unauthorized", body["error"])
				}
			}
		})
	}
}

func TestUnknownRouteIsLoud(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	r := c.api("GET", "/sandboxes", nil)
	require.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, r.obj(t)["message"], "no route for GET /api/sandboxes")
	assert.Equal(t, 1, env.Server.Requests()["UNMATCHED GET /api/sandboxes"])

	sb := c.create(nil)
	r = c.tb(sb["id"].(string), "POST", "/process/exec", map[string]any{"command": "true"})
	require.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, r.obj(t)["message"], "no route for POST /toolbox/")
}

func TestSandboxJSONShape(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	sb := c.create(map[string]any{"name": "shape", "labels": map[string]string{"k": "v"}, "env": map[string]string{"A": "1"}})

	for _, f := range []string{"id", "organizationId", "name", "user", "env", "labels", "public", "networkBlockAll",
		"kvm", "target", "cpu", "gpu", "memory", "disk", "toolboxProxyUrl", "state", "desiredState", "errorReason",
		"recoverable", "backupState", "autoStopInterval", "autoArchiveInterval", "autoDeleteInterval", "volumes",
		"createdAt", "updatedAt", "lastActivityAt", "sandboxClass", "snapshot"} {
		assert.Contains(t, sb, f)
	}
	assert.Nil(t, sb["errorReason"])
	assert.NotContains(t, sb, "autoDestroyAt")
	assert.Equal(t, env.HTTP.URL+"/toolbox", sb["toolboxProxyUrl"])
	assert.Equal(t, "daytona-small", sb["snapshot"])
	assert.EqualValues(t, 15, sb["autoStopInterval"])
	assert.EqualValues(t, 10080, sb["autoArchiveInterval"])
	assert.EqualValues(t, -1, sb["autoDeleteInterval"])
	for _, f := range []string{"createdAt", "updatedAt", "lastActivityAt"} {
		v := sb[f].(string)
		assert.True(t, strings.HasSuffix(v, "Z"), v)
		_, err := time.Parse("2006-01-02T15:04:05.000Z", v)
		assert.NoError(t, err)
	}

	var list struct {
		Items      []map[string]any `json:"items"`
		NextCursor *string          `json:"nextCursor"`
	}
	c.api("GET", "/sandbox", nil).json(t, &list)
	require.Len(t, list.Items, 1)
	assert.Nil(t, list.NextCursor)
	for _, f := range []string{"env", "volumes", "kvm", "buildInfo"} {
		assert.NotContains(t, list.Items[0], f)
	}
	for _, f := range []string{"id", "name", "labels", "state", "networkBlockAll", "toolboxProxyUrl"} {
		assert.Contains(t, list.Items[0], f)
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	c.create(map[string]any{"name": "taken"})
	tests := []struct {
		name    string
		body    any
		status  int
		message string
	}{
		{"duplicate name", map[string]any{"name": "taken"}, 409, "Sandbox with name taken already exists"},
		{"resources with snapshot", map[string]any{"cpu": 2}, 400, "Cannot specify Sandbox resources when using a snapshot"},
		{"resources with explicit snapshot", map[string]any{"snapshot": "daytona-small", "memory": 2}, 400,
			"Cannot specify Sandbox resources when using a snapshot"},
		{"unknown snapshot", map[string]any{"snapshot": "nope"}, 400,
			"Snapshot nope not found. Did you add it through the Daytona Dashboard?"},
		{"snapshot and build", map[string]any{"snapshot": "daytona-small", "buildInfo": map[string]any{"dockerfileContent": "FROM x\n"}},
			400, "Cannot specify a snapshot when using a build info entry"},
		{"negative auto-stop", map[string]any{"autoStopInterval": -1}, 400, "autoStopInterval must not be less than 0"},
		{"bad json", "{", 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := *c
			cl.t = t
			r := cl.api("POST", "/sandbox", tt.body)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			body := r.obj(t)
			assert.EqualValues(t, tt.status, body["statusCode"])
			assert.Equal(t, "/api/sandbox", body["path"])
			if tt.message != "" {
				assert.Equal(t, tt.message, body["message"])
			}
		})
	}

	t.Run("build with resources", func(t *testing.T) {
		cl := *c
		cl.t = t
		sb := cl.create(map[string]any{"cpu": 4, "memory": 8, "buildInfo": map[string]any{"dockerfileContent": "FROM node:20\n"}})
		assert.EqualValues(t, 4, sb["cpu"])
		assert.NotNil(t, sb["buildInfo"])
		r := cl.api("GET", "/sandbox/"+sb["id"].(string)+"/build-logs-url", nil)
		require.Equal(t, 200, r.status)
		u := r.obj(t)["url"].(string)
		logs := cl.do("GET", u+"?follow=true", nil)
		assert.Contains(t, string(logs.body), "FROM node:20")
	})
}

// TestStateMachine drives lifecycle calls with synchronous steps and checks
// status codes, messages and states.
func TestStateMachine(t *testing.T) {
	t.Parallel()
	type call struct {
		op      string // POST path suffix, "DELETE", "GET", or "error:recoverable"/"error:fatal"
		status  int
		state   string // expected state in the reply ("" = don't check)
		message string
	}
	tests := []struct {
		name   string
		create map[string]any
		calls  []call
	}{
		{"stop then start", nil, []call{
			{op: "stop", status: 200, state: "stopped"},
			{op: "stop", status: 400, message: "Sandbox is not in a stoppable state"},
			{op: "start", status: 200, state: "started"},
			{op: "start", status: 200, state: "started"},
		}},
		{"archive needs stopped", nil, []call{
			{op: "archive", status: 400, message: "Sandbox is not stopped"},
			{op: "stop", status: 200, state: "stopped"},
			{op: "archive", status: 200, state: "archived"},
			{op: "stop", status: 400, message: "Sandbox is not in a stoppable state"},
			{op: "start", status: 200, state: "started"},
		}},
		{"recover", nil, []call{
			{op: "recover", status: 400, message: "Sandbox is not in a recoverable state"},
			{op: "error:recoverable", state: "error"},
			{op: "start", status: 400, message: "Sandbox is in an errored state"},
			{op: "stop", status: 400, message: "Sandbox is in an errored state"},
			{op: "recover", status: 200, state: "started"},
		}},
		{"unrecoverable error can only be deleted", nil, []call{
			{op: "error:fatal", state: "error"},
			{op: "recover", status: 400, message: "Sandbox is not in a recoverable state"},
			{op: "DELETE", status: 200, state: "destroying"},
			{op: "GET", status: 404},
		}},
		{"delete", nil, []call{
			{op: "DELETE", status: 200, state: "destroying"},
			{op: "GET", status: 404},
			{op: "stop", status: 404},
		}},
		{"ephemeral stop deletes", map[string]any{"autoDeleteInterval": 0}, []call{
			{op: "archive", status: 400},
			{op: "stop", status: 200, state: "destroying"},
			{op: "GET", status: 404},
		}},
		{"pause unsupported", nil, []call{
			{op: "pause", status: 422, message: "Pausing is not supported for this sandbox"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
			id := c.create(tt.create)["id"].(string)
			for i, cl := range tt.calls {
				var r resp
				switch {
				case cl.op == "error:recoverable" || cl.op == "error:fatal":
					require.NoError(t, env.Server.SetError(id, "boom", cl.op == "error:recoverable"))
					r = c.api("GET", "/sandbox/"+id, nil)
					cl.status = 200
				case cl.op == "DELETE":
					r = c.api("DELETE", "/sandbox/"+id, nil)
				case cl.op == "GET":
					r = c.api("GET", "/sandbox/"+id, nil)
				default:
					r = c.api("POST", "/sandbox/"+id+"/"+cl.op, nil)
				}
				require.Equal(t, cl.status, r.status, "call %d %s: %s", i, cl.op, r.body)
				body := r.obj(t)
				if cl.state != "" {
					assert.Equal(t, cl.state, body["state"], "call %d %s", i, cl.op)
				}
				if cl.message != "" {
					assert.Equal(t, cl.message, body["message"], "call %d %s", i, cl.op)
				}
				if r.status == 404 {
					assert.Equal(t, "Sandbox with ID or name "+id+" not found", body["message"])
				}
			}
		})
	}
}

// TestTransitions checks the transitional states clients see while steps run,
// and the 409 answered during them.
func TestTransitions(t *testing.T) {
	t.Parallel()
	t.Run("stuck in creating answers 409", func(t *testing.T) {
		t.Parallel()
		_, c := start(t, emulator.Options{StepDelay: time.Hour, ReturnTransitional: true})
		r := c.api("POST", "/sandbox", map[string]any{})
		require.Equal(t, 200, r.status)
		sb := r.obj(t)
		id := sb["id"].(string)
		assert.Equal(t, "creating", sb["state"])
		assert.Equal(t, "started", sb["desiredState"])
		for _, op := range []string{"start", "stop", "archive"} {
			r := c.api("POST", "/sandbox/"+id+"/"+op, nil)
			assert.Equal(t, 409, r.status, op)
			assert.Equal(t, "Sandbox state change in progress", r.obj(t)["message"], op)
		}
		assert.Equal(t, 409, c.api("DELETE", "/sandbox/"+id, nil).status)
		assert.Equal(t, 400, c.tb(id, "GET", "/work-dir", nil).status, "toolbox unreachable while creating")
	})
	t.Run("steps on the emulator's clock", func(t *testing.T) {
		t.Parallel()
		// Each step lasts a second of a clock that stands still until the
		// test moves it: every transitional state holds until then (when
		// the reply comes back, and for destroying a second request), and
		// ends right then.
		const step = time.Second
		still := time.Now()
		env, c := start(t, emulator.Options{StepDelay: step, ReturnTransitional: true, ClockTimers: true, Clock: func() time.Time { return still }})
		state := func(id string) any {
			r := c.api("GET", "/sandbox/"+id, nil)
			if r.status == http.StatusNotFound {
				return "gone"
			}
			return r.obj(t)["state"]
		}
		next := func(id, during, after string) {
			t.Helper()
			env.Server.AdvanceClock(step - time.Nanosecond)
			assert.Equal(t, during, state(id), "a moment before the step ends")
			env.Server.AdvanceClock(time.Nanosecond)
			assert.Equal(t, after, state(id), "when the step ends")
		}
		r := c.api("POST", "/sandbox", map[string]any{})
		sb := r.obj(t)
		id := sb["id"].(string)
		assert.Equal(t, "creating", sb["state"])
		next(id, "creating", "started")
		r = c.api("POST", "/sandbox/"+id+"/stop", nil)
		assert.Equal(t, "stopping", r.obj(t)["state"])
		next(id, "stopping", "stopped")
		r = c.api("POST", "/sandbox/"+id+"/start", nil)
		assert.Equal(t, "starting", r.obj(t)["state"])
		next(id, "starting", "started")
		c.api("POST", "/sandbox/"+id+"/stop", nil)
		next(id, "stopping", "stopped")
		r = c.api("POST", "/sandbox/"+id+"/archive", nil)
		assert.Equal(t, "archiving", r.obj(t)["state"])
		next(id, "archiving", "archived")
		r = c.api("POST", "/sandbox/"+id+"/start", nil)
		assert.Equal(t, "restoring", r.obj(t)["state"])
		next(id, "restoring", "started")
		r = c.api("DELETE", "/sandbox/"+id, nil)
		assert.Equal(t, "destroying", r.obj(t)["state"])
		assert.Equal(t, 409, c.api("DELETE", "/sandbox/"+id, nil).status)
		next(id, "destroying", "gone")
	})
	t.Run("server waits for started by default", func(t *testing.T) {
		t.Parallel()
		_, c := start(t, emulator.Options{StepDelay: 30 * time.Millisecond})
		r := c.api("POST", "/sandbox", map[string]any{})
		// It answers once started, with the sandbox as it was when created
		// (the real controller drops what its wait returns).
		assert.Equal(t, "creating", r.obj(t)["state"])
		id := r.obj(t)["id"].(string)
		assert.Equal(t, "started", c.api("GET", "/sandbox/"+id, nil).obj(t)["state"])
		c.api("POST", "/sandbox/"+id+"/stop", nil)
		c.waitState(id, "stopped")
		assert.Equal(t, "started", c.api("POST", "/sandbox/"+id+"/start", nil).obj(t)["state"])
	})
}

func TestIntervalsLabelsAndTTL(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous, Clock: clock.Now})
	sb := c.create(nil)
	id := sb["id"].(string)

	for _, tt := range []struct {
		path  string
		field string
		want  float64
	}{
		{"/autostop/30", "autoStopInterval", 30},
		{"/autoarchive/0", "autoArchiveInterval", 43200},
		{"/autoarchive/60", "autoArchiveInterval", 60},
		{"/autodelete/0", "autoDeleteInterval", 0},
		{"/autodelete/-1", "autoDeleteInterval", -1},
		{"/public/true", "public", 0},
	} {
		r := c.api("POST", "/sandbox/"+id+tt.path, nil)
		require.Equal(t, http.StatusCreated, r.status, "%s: %s", tt.path, r.body)
		if tt.field != "public" {
			assert.EqualValues(t, tt.want, r.obj(t)[tt.field], tt.path)
		} else {
			assert.Equal(t, true, r.obj(t)["public"])
		}
	}
	assert.Equal(t, 400, c.api("POST", "/sandbox/"+id+"/autostop/x", nil).status)

	r := c.api("PUT", "/sandbox/"+id+"/labels", map[string]any{"labels": map[string]string{"only": "this"}})
	require.Equal(t, 200, r.status)
	assert.Equal(t, map[string]any{"labels": map[string]any{"only": "this"}}, r.obj(t))
	assert.Equal(t, map[string]any{"only": "this"}, c.api("GET", "/sandbox/"+id, nil).obj(t)["labels"])

	// TTL: re-anchored from now, 0 clears it, elapsing destroys even a stopped sandbox.
	r = c.api("POST", "/sandbox/"+id+"/ttl/10", nil)
	require.Equal(t, http.StatusCreated, r.status)
	assert.Equal(t, clock.Now().Add(10*time.Minute).Format("2006-01-02T15:04:05.000Z"), r.obj(t)["autoDestroyAt"])
	r = c.api("POST", "/sandbox/"+id+"/ttl/0", nil)
	assert.NotContains(t, r.obj(t), "autoDestroyAt")
	c.api("POST", "/sandbox/"+id+"/ttl/10", nil)
	c.api("POST", "/sandbox/"+id+"/stop", nil)
	dir := env.Server.Sandboxes()[0].Dir
	clock.Advance(9 * time.Minute)
	env.Server.Reap()
	assert.Equal(t, 200, c.api("GET", "/sandbox/"+id, nil).status)
	clock.Advance(time.Minute)
	env.Server.Reap()
	assert.Equal(t, 404, c.api("GET", "/sandbox/"+id, nil).status)
	_, err := os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "sandbox folder removed")

	// TTL given at create time.
	sb2 := c.create(map[string]any{"ttlMinutes": 5})
	assert.Equal(t, clock.Now().Add(5*time.Minute).Format("2006-01-02T15:04:05.000Z"), sb2["autoDestroyAt"])
	env.Server.AdvanceClock(6 * time.Minute)
	assert.Equal(t, 404, c.api("GET", "/sandbox/"+sb2["id"].(string), nil).status)
}

func TestAutoStopAndAutoDelete(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous, Clock: clock.Now})
	id := c.create(map[string]any{"autoStopInterval": 5, "autoArchiveInterval": 30})["id"].(string)
	require.Equal(t, 201, c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}).status)
	v, _ := env.Server.Sandbox(id)
	assert.Equal(t, 1, v.Processes)

	clock.Advance(4 * time.Minute)
	c.tb(id, "GET", "/work-dir", nil) // activity resets the timer
	clock.Advance(4 * time.Minute)
	env.Server.Reap()
	assert.Equal(t, "started", c.api("GET", "/sandbox/"+id, nil).obj(t)["state"])
	clock.Advance(time.Minute)
	env.Server.Reap()
	assert.Equal(t, "stopped", c.api("GET", "/sandbox/"+id, nil).obj(t)["state"])
	v, _ = env.Server.Sandbox(id)
	assert.Equal(t, 0, v.Sessions)
	assert.Zero(t, v.Processes, "auto-stop leaves no process")

	clock.Advance(30 * time.Minute)
	env.Server.Reap()
	assert.Equal(t, "archived", c.api("GET", "/sandbox/"+id, nil).obj(t)["state"])

	// autoDeleteInterval 0: a stop behind the client's back deletes the sandbox.
	eph := c.create(map[string]any{"autoDeleteInterval": 0})["id"].(string)
	require.NoError(t, env.Server.StopBehindClientsBack(eph))
	env.Server.Reap()
	assert.Equal(t, 404, c.api("GET", "/sandbox/"+eph, nil).status)
}

func TestList(t *testing.T) {
	t.Parallel()
	_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	var ids []string
	for i := 0; i < 5; i++ {
		labels := map[string]string{"team": "a", "n": string(rune('0' + i))}
		if i >= 3 {
			labels["team"] = "b"
		}
		ids = append(ids, c.create(map[string]any{"labels": labels})["id"].(string))
	}
	c.api("POST", "/sandbox/"+ids[0]+"/stop", nil)

	type page struct {
		Items      []map[string]any `json:"items"`
		NextCursor *string          `json:"nextCursor"`
	}
	get := func(q url.Values) (page, resp) {
		r := c.api("GET", "/sandbox?"+q.Encode(), nil)
		var p page
		if r.status == 200 {
			r.json(t, &p)
		}
		return p, r
	}
	p, _ := get(url.Values{"labels": {`{"team":"a"}`}})
	assert.Len(t, p.Items, 3)
	p, _ = get(url.Values{"labels": {`{"team":"a","n":"1"}`}})
	require.Len(t, p.Items, 1)
	assert.Equal(t, ids[1], p.Items[0]["id"])
	p, _ = get(url.Values{"states": {"stopped"}})
	require.Len(t, p.Items, 1)
	assert.Equal(t, ids[0], p.Items[0]["id"])
	p, _ = get(url.Values{"states": {"stopped", "started"}})
	assert.Len(t, p.Items, 5)

	seen := map[string]bool{}
	q := url.Values{"limit": {"2"}}
	pages := 0
	for {
		p, r := get(q)
		require.Equal(t, 200, r.status, "%s", r.body)
		pages++
		for _, it := range p.Items {
			seen[it["id"].(string)] = true
		}
		if p.NextCursor == nil {
			break
		}
		q.Set("cursor", *p.NextCursor)
	}
	assert.Equal(t, 3, pages)
	assert.Len(t, seen, 5)

	for _, tt := range []struct {
		q       url.Values
		message string
	}{
		{url.Values{"labels": {"{bad"}}, "Invalid labels JSON format"},
		{url.Values{"cursor": {base64.StdEncoding.EncodeToString([]byte("nope"))}}, "Invalid cursor provided"},
		{url.Values{"limit": {"201"}}, "limit must not be greater than 200"},
		{url.Values{"limit": {"0"}}, "limit must not be less than 1"},
		{url.Values{"states": {"sleeping"}}, ""},
	} {
		_, r := get(tt.q)
		assert.Equal(t, 400, r.status, tt.q.Encode())
		if tt.message != "" {
			assert.Equal(t, tt.message, r.obj(t)["message"])
		}
	}
}

func TestSSHAccessAndPreview(t *testing.T) {
	t.Parallel()
	_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(map[string]any{"name": "ssh-box"})["id"].(string)

	first := c.api("POST", "/sandbox/ssh-box/ssh-access?expiresInMinutes=30", nil)
	require.Equal(t, 200, first.status)
	a := first.obj(t)
	tok := a["token"].(string)
	assert.Len(t, tok, 32)
	assert.Equal(t, "ssh "+tok+"@ssh.app.daytona.io", a["sshCommand"])
	for _, f := range []string{"id", "sandboxId", "expiresAt", "createdAt", "updatedAt"} {
		assert.Contains(t, a, f)
	}
	valid := func(tok string) bool {
		return c.api("GET", "/sandbox/ssh-access/validate?token="+tok, nil).obj(t)["valid"].(bool)
	}
	assert.True(t, valid(tok))
	second := c.api("POST", "/sandbox/"+id+"/ssh-access", nil).obj(t)["token"].(string)
	assert.False(t, valid(tok), "a new token revokes the previous one")
	r := c.api("DELETE", "/sandbox/"+id+"/ssh-access?token="+second, nil)
	require.Equal(t, 200, r.status)
	assert.Equal(t, id, r.obj(t)["id"], "revoke answers the Sandbox")
	assert.False(t, valid(second))
	third := c.api("POST", "/sandbox/"+id+"/ssh-access", nil).obj(t)["token"].(string)
	require.Equal(t, 200, c.api("DELETE", "/sandbox/"+id+"/ssh-access", nil).status)
	assert.False(t, valid(third))

	p := c.api("GET", "/sandbox/"+id+"/ports/3000/preview-url", nil).obj(t)
	assert.Equal(t, id, p["sandboxId"])
	assert.True(t, strings.HasPrefix(p["url"].(string), "https://3000-"+id+"."), p["url"])
	assert.NotEmpty(t, p["token"])
	assert.Equal(t, 400, c.api("GET", "/sandbox/"+id+"/ports/0/preview-url", nil).status)
}

func TestSnapshots(t *testing.T) {
	t.Parallel()
	_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	small := c.api("GET", "/snapshots/daytona-small", nil)
	require.Equal(t, 200, small.status)
	assert.Equal(t, "active", small.obj(t)["state"])
	assert.EqualValues(t, 1, small.obj(t)["mem"])
	assert.Equal(t, 404, c.api("GET", "/snapshots/nope", nil).status)
	r := c.api("DELETE", "/snapshots/daytona-small", nil)
	assert.Equal(t, 400, r.status)
	assert.Equal(t, "Validation failed (uuid is expected)", r.obj(t)["message"])
	assert.Equal(t, 403, c.api("DELETE", "/snapshots/"+small.obj(t)["id"].(string), nil).status)

	sb := c.create(nil)
	id := sb["id"].(string)
	code, _ := c.execute(id, "mkdir -p keep && echo kept > keep/file.txt")
	require.Equal(t, 0, code)
	r = c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "tmpl"})
	require.Equal(t, 200, r.status, "%s", r.body)
	snap := c.api("GET", "/snapshots/tmpl", nil).obj(t)
	assert.Equal(t, "active", snap["state"])
	assert.Equal(t, id, snap["sourceSandboxId"])
	// The real API does not check the name up front: the job's insert fails
	// at the end and the existing snapshot stays as it was.
	r = c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "tmpl"})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "started", r.obj(t)["state"])
	assert.Equal(t, snap["id"], c.api("GET", "/snapshots/tmpl", nil).obj(t)["id"])

	clone := c.create(map[string]any{"snapshot": "tmpl"})
	_, out := c.execute(clone["id"].(string), "cat keep/file.txt")
	assert.Equal(t, "kept\n", out)

	require.Equal(t, 200, c.api("DELETE", "/snapshots/"+snap["id"].(string), nil).status)
	assert.Equal(t, 404, c.api("GET", "/snapshots/tmpl", nil).status)
}

func TestSnapshotFromSandboxStates(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	sb := c.create(nil)
	id := sb["id"].(string)
	code, _ := c.execute(id, "echo stopped-state > file.txt")
	require.Equal(t, 0, code)
	require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/stop", nil).status)

	// A stopped sandbox can be captured and stays stopped.
	r := c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "from-stopped"})
	require.Equal(t, 200, r.status, "%s", r.body)
	assert.Equal(t, "stopped", r.obj(t)["state"])
	clone := c.create(map[string]any{"snapshot": "from-stopped"})
	_, out := c.execute(clone["id"].(string), "cat file.txt")
	assert.Equal(t, "stopped-state\n", out)

	// An archived one cannot, and nothing is created.
	require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/archive", nil).status)
	r = c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "from-archived"})
	require.Equal(t, 400, r.status, "%s", r.body)
	assert.Equal(t, "Sandbox must be in started or stopped state to create a snapshot", r.obj(t)["message"])
	assert.Equal(t, 404, c.api("GET", "/snapshots/from-archived", nil).status)
	assert.NotContains(t, env.Server.Snapshots(), "from-archived")
}

func TestSnapshotFaults(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: 10 * time.Millisecond})
	id := c.create(nil)["id"].(string)
	state := func() string { return c.api("GET", "/sandbox/"+id, nil).obj(t)["state"].(string) }
	waitState := func(want string) { t.Helper(); c.waitState(id, want) }

	// The job fails: back to started, no snapshot, nothing to tell it apart by state.
	env.Server.AddSnapshotFault(emulator.SnapshotFault{SandboxID: id, Times: 1, Outcome: emulator.SnapshotJobFails})
	require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "failed"}).status)
	waitState("started")
	assert.Equal(t, 404, c.api("GET", "/snapshots/failed", nil).status)

	// The sandbox errors.
	env.Server.AddSnapshotFault(emulator.SnapshotFault{SandboxID: id, Times: 1, Outcome: emulator.SnapshotSandboxErrors, Reason: "disk full"})
	require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "errored"}).status)
	waitState("error")
	assert.Equal(t, "disk full", c.api("GET", "/sandbox/"+id, nil).obj(t)["errorReason"])
	assert.Equal(t, 404, c.api("GET", "/snapshots/errored", nil).status)

	// A slow job: snapshotting (lifecycle calls refused) until the hold ends,
	// and only then the snapshot exists.
	id = c.create(nil)["id"].(string)
	release := make(chan struct{})
	env.Server.AddSnapshotFault(emulator.SnapshotFault{Times: 1, Until: release})
	require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "slow"}).status)
	assert.Equal(t, "snapshotting", state())
	assert.Equal(t, 404, c.api("GET", "/snapshots/slow", nil).status)
	assert.Equal(t, 409, c.api("DELETE", "/sandbox/"+id, nil).status)
	// The real API checks the state before the pending flag: 400, not 409.
	assert.Equal(t, 400, c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "again"}).status)
	close(release)
	waitState("started")
	assert.Equal(t, "active", c.api("GET", "/snapshots/slow", nil).obj(t)["state"])

	// A held job ends by itself.
	env.Server.AddSnapshotFault(emulator.SnapshotFault{Times: 1, Hold: 50 * time.Millisecond})
	require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/snapshot", map[string]any{"name": "held"}).status)
	waitState("started")
	assert.Equal(t, "active", c.api("GET", "/snapshots/held", nil).obj(t)["state"])
}

func TestIssuedSecrets(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	ssh := c.api("POST", "/sandbox/"+id+"/ssh-access?expiresInMinutes=5", nil).obj(t)["token"].(string)
	preview := c.api("GET", "/sandbox/"+id+"/ports/43127/preview-url", nil).obj(t)["token"].(string)
	assert.ElementsMatch(t, []string{ssh, preview}, env.Server.IssuedSecrets())
	require.Equal(t, 200, c.api("DELETE", "/sandbox/"+id, nil).status)
	assert.ElementsMatch(t, []string{ssh, preview}, env.Server.IssuedSecrets(), "kept after the sandbox is gone")
}

// While a sandbox archives (stored stopped or archiving, desired archived)
// the real API's start and delete go through: start checks the state only
// against desired archived (sandbox.service start), and delete refuses only
// a pending sandbox, which one with desired archived never is
// (Sandbox.enforceInvariants). Stop and archive still answer 409: they
// compare the state with the desired one.
func TestLifecycleWhileArchiving(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method string
		op     string // path after /sandbox/<id>
		status int
		after  string // the state it reaches; "gone": deleted
	}{
		{"POST", "/start", 200, "started"},
		{"DELETE", "", 200, "gone"},
		{"POST", "/stop", 409, "archiving"},
		{"POST", "/archive", 409, "archiving"},
	}
	for _, tc := range cases {
		t.Run(tc.method+tc.op, func(t *testing.T) {
			t.Parallel()
			_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous, ArchiveDelay: time.Hour})
			id := c.create(nil)["id"].(string)
			require.Equal(t, 200, c.api("POST", "/sandbox/"+id+"/stop", nil).status)
			r := c.api("POST", "/sandbox/"+id+"/archive", nil)
			require.Equal(t, "archiving", r.obj(t)["state"])

			r = c.api(tc.method, "/sandbox/"+id+tc.op, nil)
			assert.Equal(t, tc.status, r.status, "%s %s while archiving: %s", tc.method, tc.op, r.body)
			if tc.status == 409 {
				assert.Equal(t, "Sandbox state change in progress", r.obj(t)["message"])
			}
			c.waitState(id, tc.after)
		})
	}
}

// The service's routes are not strict about a trailing slash: GET
// /api/sandbox/ (where a lookup of an empty id lands) is the list, as GET
// /api/sandbox is, not an unknown route.
func TestTheSandboxListAnswersWithATrailingSlash(t *testing.T) {
	t.Parallel()
	_, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	c.create(nil)
	plain := c.api("GET", "/sandbox", nil)
	slash := c.api("GET", "/sandbox/", nil)
	require.Equal(t, http.StatusOK, plain.status)
	require.Equal(t, http.StatusOK, slash.status)
	assert.JSONEq(t, string(plain.body), string(slash.body))
}
