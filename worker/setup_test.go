package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// The expectations were taken from the plugin's sanitizeSnapshotName run
// under Node 20.
func TestSanitizeSnapshotNameIsThePlugins(t *testing.T) {
	t.Parallel()
	const fallback = "paperclip-Env-1-abcdef12"
	str := func(s string) *string { return &s }
	long := func(c string, n int) string {
		b := make([]byte, 0, n)
		for range n {
			b = append(b, c...)
		}
		return string(b)
	}
	tests := []struct {
		label *string
		want  string
	}{
		{nil, "paperclip-env-1-abcdef12"}, // a missing label sanitises the fallback
		{str(""), fallback},               // an empty result falls back as it is
		{str("   "), fallback},
		{str("My Template!! v1"), "my-template-v1"},
		{str("  --Hello__World..  "), "hello__world.."},
		{str("İstanbul"), "i-stanbul"}, // U+0130 lowers to i + U+0307 in JavaScript
		{str("KELVIN\u212A"), "kelvink"},
		{str(long("a", 120)), long("a", 96)},
		{str("-----x-----"), "x"},
		{str("ÄÖÜ"), fallback},
		{str("😀emoji😀"), "emoji"},
		{str("a--b"), "a--b"},
		{str("tab\tnew\nline"), "tab-new-line"},
		{str("ß"), fallback},
		{str("\u00a0nbsp\u00a0"), "nbsp"},
		{str(long("x", 95) + "!!y"), long("x", 95) + "-"}, // cut after the dashes are trimmed
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, sanitizeSnapshotName(tt.label, fallback), "label %v", tt.label)
	}
}

func TestConnectionExpiresInMinutesClamps(t *testing.T) {
	t.Parallel()
	tests := map[string]int{
		``: 60, `null`: 60, `"30"`: 60, `true`: 60, `{}`: 60, `[5]`: 60, `1e400`: 60, `-1e400`: 60,
		`30`: 30, `30.9`: 30, `0`: 1, `0.5`: 1, `-5`: 1, `1440`: 1440, `1441`: 1440, `5000`: 1440, `1e300`: 1440,
	}
	for raw, want := range tests {
		assert.Equal(t, want, connectionExpiresInMinutes(json.RawMessage(raw)), "connectionExpiresInMinutes(%s)", raw)
	}
}

func TestCaptureTimeout(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]float64{``: 300000, `null`: 300000, `"5000"`: 300000, `0`: 300000, `-1`: 300000,
		`1e400`: 300000, `5000`: 5000, `5000.7`: 5000, `0.5`: 0} { // Math.trunc(0.5): 0 ms, which waits one second
		assert.Equal(t, want, captureTimeoutMs(json.RawMessage(raw), 300000), "captureTimeoutMs(%s)", raw)
	}
}

func TestSetupSourceTemplate(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	img, snap := "base-image:1", "base-snap"
	cfg := config.Driver{Image: &img, Snapshot: &snap}
	tests := []struct {
		ref, kind *string
		image     *string
		snapshot  *string
		err       string
	}{
		{image: &img, snapshot: &snap},
		{ref: str(""), kind: str("image"), image: &img, snapshot: &snap},
		{ref: str("tmpl"), snapshot: str("tmpl")},
		{ref: str("tmpl"), kind: str("snapshot"), snapshot: str("tmpl")},
		{ref: str("ubuntu:24.04"), kind: str("image"), image: str("ubuntu:24.04")},
		{ref: str("tmpl"), kind: str("provider_template"), err: "Daytona interactive setup can start from image or snapshot templates only, not provider_template."},
		{ref: str("tmpl"), kind: str(""), err: "Daytona interactive setup can start from image or snapshot templates only, not ."},
	}
	for _, tt := range tests {
		got, err := withSetupSourceTemplate(cfg, protocol.StartInteractiveSetupParams{SourceTemplateRef: tt.ref, SourceTemplateKind: tt.kind})
		if tt.err != "" {
			assert.EqualError(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.image, got.Image)
		assert.Equal(t, tt.snapshot, got.Snapshot)
	}
}

// The expectations were taken from the plugin's URL handling (WHATWG URL in
// Node 20): new URL(link), protocol set to wss:, pathname set to the old one
// without its trailing slash followed by the path, toString().
func TestPreviewWebsocketURLIsWHATWGs(t *testing.T) {
	t.Parallel()
	const p = "/api/runner/v1/connect/abc"
	tests := []struct{ link, path, want string }{
		{"https://43127-abc.proxy.daytona.work", p, "wss://43127-abc.proxy.daytona.work/api/runner/v1/connect/abc"},
		{"https://43127-abc.proxy.daytona.work/", p, "wss://43127-abc.proxy.daytona.work/api/runner/v1/connect/abc"},
		{"https://43127-ABC.Proxy.Daytona.Work:443/", p, "wss://43127-abc.proxy.daytona.work/api/runner/v1/connect/abc"},
		{"https://h:8443/base/", p, "wss://h:8443/base/api/runner/v1/connect/abc"},
		{"https://h:08443/base", p, "wss://h:8443/base/api/runner/v1/connect/abc"},
		{"https://h/base//", p, "wss://h/base//api/runner/v1/connect/abc"},
		{"https://h/?", p, "wss://h/api/runner/v1/connect/abc?"},
		{"https://h/#", p, "wss://h/api/runner/v1/connect/abc#"},
		{"https://@h/", p, "wss://h/api/runner/v1/connect/abc"},
		{"https://h", "/api/runner/v1/connect/a b", "wss://h/api/runner/v1/connect/a%20b"},
		{"https://h", `/api/runner/v1/connect/..\x`, "wss://h/api/runner/v1/x"},
		{"https://h", "/api/runner/v1/connect/..", "wss://h/api/runner/v1/"},
		{"https://h", "/api/runner/v1/connect/%2e%2E", "wss://h/api/runner/v1/"},
		{"https://h", "/api/runner/v1/connect/.", "wss://h/api/runner/v1/connect/"},
		{"https://h", "/api/runner/v1/connect/a^b`c{d}e|f\"g<h>i", "wss://h/api/runner/v1/connect/a^b%60c%7Bd%7De|f%22g%3Ch%3Ei"},
		{"https://h", "/api/runner/v1/connect/é\u0001\u007f", "wss://h/api/runner/v1/connect/%C3%A9%01%7F"},
		{"https://h", "/api/runner/v1/connect/a\tb\nc", "wss://h/api/runner/v1/connect/abc"},
		{"https://h", "/api/runner/v1/connect/%41%zz", "wss://h/api/runner/v1/connect/%41%zz"},
		{"https://h", "/api/runner/v1/connect/a'b;c=d&e+f$g!h*i(j)k,l:m@n~o", "wss://h/api/runner/v1/connect/a'b;c=d&e+f$g!h*i(j)k,l:m@n~o"},
		{"  https://h/  ", "/api/runner/v1/connect/x", "wss://h/api/runner/v1/connect/x"},
		{"HTTPS://h/", "/api/runner/v1/connect/x", "wss://h/api/runner/v1/connect/x"},
		{"https://h/%7e", "/api/runner/v1/connect/x", "wss://h/%7e/api/runner/v1/connect/x"},
		{"https://h/a%2fb/", "/api/runner/v1/connect/x", "wss://h/a%2fb/api/runner/v1/connect/x"},
		{"https://h/a b/", "/api/runner/v1/connect/x", "wss://h/a%20b/api/runner/v1/connect/x"},
		{"https://[::1]:443/", "/api/runner/v1/connect/x", "wss://[::1]/api/runner/v1/connect/x"},
		{"https://127.0.0.1/", "/api/runner/v1/connect/x", "wss://127.0.0.1/api/runner/v1/connect/x"},
		{"https://h:/", "/api/runner/v1/connect/x", "wss://h/api/runner/v1/connect/x"},
	}
	for _, tt := range tests {
		got, err := previewWebsocketURL(tt.link, tt.path)
		require.NoError(t, err, "%q + %q", tt.link, tt.path)
		assert.Equal(t, tt.want, got, "%q + %q", tt.link, tt.path)
	}
	for _, bad := range []string{"http://h/", "wss://h/", "https://user@h/", "https://:pw@h/", "https://u:p@h/",
		"https://h/?q=1", "https://h/#frag", "https://h:99999/", "not a url", "", "https://",
		"https://h\\x"} {
		_, err := previewWebsocketURL(bad, p)
		assert.EqualError(t, err, msgPreviewInvalidURL, "%q", bad)
	}
}

func TestIngressGenerationFollowsTheLifecycleRevision(t *testing.T) {
	t.Parallel()
	var g ingressGenerations
	ids := 0
	newID := func() string { ids++; return "random-" + string(rune('a'+ids)) }
	sbx := &daytona.Sandbox{ID: "sb-1", CreatedAt: "2026-01-01T00:00:00.000Z", UpdatedAt: "2026-01-01T00:00:01.000Z"}
	first := g.generation(sbx, newID)
	assert.Equal(t, sha256Hex("sb-1\x002026-01-01T00:00:01.000Z"), first, "sha256 of id NUL updatedAt, as the plugin")
	assert.Equal(t, first, g.generation(sbx, newID), "stable within one revision")
	sbx.UpdatedAt = "2026-01-01T00:05:00.000Z"
	second := g.generation(sbx, newID)
	assert.NotEqual(t, first, second, "a new revision (stop/start) makes a new generation")

	noUpdate := &daytona.Sandbox{ID: "sb-2", CreatedAt: "2026-01-01T00:00:00.000Z"}
	assert.Equal(t, sha256Hex("sb-2\x002026-01-01T00:00:00.000Z"), g.generation(noUpdate, newID), "createdAt when updatedAt is missing")

	bare := &daytona.Sandbox{ID: "sb-3"}
	random := g.generation(bare, newID)
	assert.Equal(t, random, g.generation(bare, newID), "no revision: one random generation, kept")
	assert.Equal(t, 1, ids, "the random seed was drawn once")

	g.reset()
	assert.NotEqual(t, random, g.generation(bare, newID), "forgotten at shutdown")
	assert.Equal(t, second, g.generation(sbx, newID), "a known revision gives the same generation after a reset")
}

// snapshottingWatcher serves the emulator and counts the sandbox reads that
// answered "snapshotting", and the start requests.
type snapshottingWatcher struct {
	env       *emulatortest.Env
	reads     atomic.Int32
	starts    atomic.Int32
	readTwice chan struct{}
	once      sync.Once
}

func (sw *snapshottingWatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/start") {
		sw.starts.Add(1)
	}
	rec := httptest.NewRecorder()
	sw.env.Server.ServeHTTP(rec, r)
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/sandbox/") && strings.Count(r.URL.Path, "/") == 3 &&
		strings.Contains(rec.Body.String(), `"state":"snapshotting"`) && sw.reads.Add(1) == 2 {
		sw.once.Do(func() { close(sw.readTwice) })
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// A host may poll a setup while its capture runs: the poll waits for
// Daytona to give the sandbox back, instead of trying to start a sandbox
// in the middle of a snapshot (a 409 the plugin's cached handle hides).
func TestSetupPollWaitsOutASnapshot(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	sw := &snapshottingWatcher{env: env, readTwice: make(chan struct{})}
	front := httptest.NewServer(sw)
	t.Cleanup(front.Close)
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	base := fmt.Sprintf(`"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000}`, env.APIKey, front.URL+"/api")
	call := func(method, params string) (any, error) {
		return w.Handle(context.Background(), &rpc.Request{Method: method, Params: json.RawMessage(`{` + base + params + `}`)})
	}
	res, err := call("environmentStartInteractiveSetup", `,"sessionId":"s"`)
	require.NoError(t, err)
	id := *res.(protocol.InteractiveSetupSession).ProviderLeaseID

	release := make(chan struct{})
	env.Server.AddSnapshotFault(emulator.SnapshotFault{Until: release})
	client := emulatorClient(t, env)
	_, err = client.CreateSnapshotFromSandbox(t.Context(), id, "captured-meanwhile")
	require.NoError(t, err)

	type answer struct {
		res any
		err error
	}
	polled := make(chan answer, 1)
	go func() {
		res, err := call("environmentGetInteractiveSetup", `,"providerLeaseId":"`+id+`"`)
		polled <- answer{res, err}
	}()
	select {
	case <-sw.readTwice: // the poll saw the snapshot and is waiting on it
	case a := <-polled:
		t.Fatalf("the poll answered while the sandbox was snapshotting: %v, %v", a.res, a.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the poll never waited on the snapshot")
	}
	close(release)
	a := <-polled
	require.NoError(t, a.err)
	got := a.res.(protocol.InteractiveSetupSession)
	assert.Equal(t, protocol.SetupStatusWaitingForUser, got.Status)
	assert.Equal(t, "started", *got.Metadata.(setupMetadata).SandboxState)
	assert.Zero(t, sw.starts.Load(), "nothing asked Daytona to start a sandbox it was snapshotting")

	_, err = call("environmentCancelInteractiveSetup", `,"providerLeaseId":"`+id+`"`)
	require.NoError(t, err)
	require.NoError(t, client.DeleteSnapshot(t.Context(), "captured-meanwhile"))
}
