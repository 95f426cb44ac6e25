package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
)

// oddParamsCase is one call with params of an odd shape and what the
// plugin answers to it (taken from the Node reference worker, see
// testdata/refcheck/odd-params-*.scenario): the JSON of the result, checked
// member by member where want names members, or the error message.
type oddParamsCase struct {
	name   string
	method string
	params string // members after the base ones; ${SETUP}, ${LEASE}, ${CWD} are replaced
	noBase bool   // params are only what params says
	want   map[string]any
	err    string
}

// oddParamsWorld is a worker with an interactive setup sandbox and a lease
// on an emulator.
type oddParamsWorld struct {
	w     *Worker
	base  string
	vars  *strings.Replacer
	setup string
}

func newOddParamsWorld(t *testing.T) *oddParamsWorld {
	t.Helper()
	env := emulatortest.Start(t, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	o := &oddParamsWorld{w: w, base: fmt.Sprintf(`"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000}`, env.APIKey, env.APIURL)}
	res, err := w.Handle(context.Background(), requestOf("environmentStartInteractiveSetup", `{`+o.base+`,"sessionId":"s"}`))
	require.NoError(t, err)
	o.setup = *res.(protocol.InteractiveSetupSession).ProviderLeaseID
	lease := acquireThroughHandler(t, w, env.APIKey, env.APIURL)
	res, err = w.Handle(context.Background(), requestOf("environmentRealizeWorkspace", `{`+lease.base+`,"lease":{"providerLeaseId":"`+lease.id+`"},"workspace":{}}`))
	require.NoError(t, err)
	cwd, _ := json.Marshal(res)
	var realized struct{ Cwd string }
	require.NoError(t, json.Unmarshal(cwd, &realized))
	o.vars = strings.NewReplacer("${SETUP}", o.setup, "${LEASE}", lease.id, "${CWD}", realized.Cwd)
	return o
}

func (o *oddParamsWorld) run(t *testing.T, tests []oddParamsCase) {
	t.Helper()
	for _, tt := range tests {
		params := o.vars.Replace(tt.params)
		if !tt.noBase {
			params = `{` + o.base + `,` + params + `}`
		}
		res, err := o.w.Handle(context.Background(), &rpc.Request{Method: tt.method, Params: json.RawMessage(params)})
		if tt.err != "" {
			assert.EqualError(t, err, tt.err, tt.name)
			continue
		}
		if !assert.NoError(t, err, tt.name) {
			continue
		}
		b, err := json.Marshal(res)
		require.NoError(t, err, tt.name)
		var got map[string]any
		require.NoError(t, json.Unmarshal(b, &got), tt.name)
		for path, want := range tt.want {
			assert.Equal(t, want, lookupPath(got, path), "%s: %s in %s", tt.name, path, b)
		}
	}
}

// lookupPath reads a dotted path of object members ("" is the whole value).
func lookupPath(v any, path string) any {
	if path == "" {
		return v
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		if v, ok = m[k]; !ok {
			return "<absent>"
		}
	}
	return v
}

var missingSetupResult = map[string]any{"status": "missing", "providerLeaseId": nil, "connectionPayload": nil}

func TestSetupAndTemplateParamsAreReadAsThePluginReadsThem(t *testing.T) {
	t.Parallel()
	o := newOddParamsWorld(t)
	const kindError = "Daytona interactive setup can start from image or snapshot templates only, not "
	o.run(t, []oddParamsCase{
		{name: "a falsy template ref leaves the kind unread", method: "environmentStartInteractiveSetup",
			params: `"sessionId":"s2","sourceTemplateRef":"","sourceTemplateKind":5,"expiresAt":12345`,
			want:   map[string]any{"status": "waiting_for_user", "expiresAt": float64(12345)}},
		{name: "a falsy session id sets no label; a key-only driverKey may be a number", method: "environmentStartInteractiveSetup",
			params: `"driverKey":7,"sessionId":0,"connectionExpiresInMinutes":0.5`,
			want:   map[string]any{"status": "waiting_for_user", "connectionSummary.metadata.expiresInMinutes": float64(1)}},
		{name: "a kind that is an array is never the snapshot kind", method: "environmentStartInteractiveSetup",
			params: `"sessionId":"s","sourceTemplateRef":"snap","sourceTemplateKind":["snapshot"]`, err: kindError + "snapshot."},
		{name: "a kind that is an object", method: "environmentStartInteractiveSetup",
			params: `"sessionId":"s","sourceTemplateRef":"snap","sourceTemplateKind":{"kind":"image"}`, err: kindError + "[object Object]."},
		{name: "a kind that is a number", method: "environmentStartInteractiveSetup",
			params: `"sessionId":"s","sourceTemplateRef":"snap","sourceTemplateKind":1e21`, err: kindError + "1e+21."},

		{name: "poll of lease 0", method: "environmentGetInteractiveSetup", params: `"providerLeaseId":0`, want: missingSetupResult},
		{name: "poll of lease false", method: "environmentGetInteractiveSetup", params: `"providerLeaseId":false,"includeConnectionPayload":true`, want: missingSetupResult},
		{name: "poll of a numeric lease looks up its String()", method: "environmentGetInteractiveSetup", params: `"providerLeaseId":123`, want: missingSetupResult},
		{name: "poll whose key-only base members are of other types", method: "environmentGetInteractiveSetup",
			params: `"driverKey":1,"companyId":2,"environmentId":null,"providerLeaseId":"${SETUP}","setupMetadata":"x"`,
			want:   map[string]any{"status": "waiting_for_user", "providerLeaseId": o.setup}},

		{name: "capture of lease false reads no label", method: "environmentCaptureTemplate",
			params: `"providerLeaseId":false,"templateLabel":5`, err: msgCaptureNeedsLease},
		{name: "capture of a numeric lease", method: "environmentCaptureTemplate",
			params: `"providerLeaseId":123`, err: "Sandbox with ID or name 123 not found"},
		{name: "capture of a found lease with a label that is no string", method: "environmentCaptureTemplate",
			params: `"providerLeaseId":"${SETUP}","templateLabel":5`,
			err:    "Invalid params for environmentCaptureTemplate: params.templateLabel must be a string"},

		{name: "delete with a kind that is an array, before the config is read", method: "environmentDeleteTemplate", noBase: true,
			params: `{"driverKey":"daytona","config":null,"templateRef":"x","templateKind":["snapshot"]}`,
			err:    "Daytona can delete snapshot templates only, not snapshot."},
		{name: "delete with a kind that is a number", method: "environmentDeleteTemplate",
			params: `"templateRef":"x","templateKind":5`, err: "Daytona can delete snapshot templates only, not 5."},
		{name: "delete of a numeric ref looks up its String()", method: "environmentDeleteTemplate",
			params: `"templateRef":5,"reason":{"why":1},"metadata":"x"`,
			want:   map[string]any{"deleted": true, "metadata.reason": map[string]any{"why": float64(1)}}},

		{name: "cancel of lease 0", method: "environmentCancelInteractiveSetup", params: `"providerLeaseId":0,"reason":{"a":1}`,
			want: map[string]any{"status": "missing", "metadata.reason": map[string]any{"a": float64(1)}}},
		{name: "cancel of a numeric lease", method: "environmentCancelInteractiveSetup", params: `"providerLeaseId":123,"reason":"timed_out"`,
			want: map[string]any{"status": "missing", "metadata.reason": "timed_out"}},
	})
}

// A capture without environmentId interpolates it as JavaScript does.
func TestCaptureFallbackNameInterpolatesEnvironmentID(t *testing.T) {
	t.Parallel()
	o := newOddParamsWorld(t)
	for _, tt := range []struct{ member, prefix string }{
		{``, "paperclip-undefined-"},
		{`"environmentId":null,`, "paperclip-null-"},
		{`"environmentId":42,`, "paperclip-42-"},
	} {
		params := strings.Replace(`{`+o.base+`,`+tt.member+`"providerLeaseId":"`+o.setup+`"}`, `"environmentId":"e",`, "", 1)
		res, err := o.w.Handle(context.Background(), requestOf("environmentCaptureTemplate", params))
		require.NoError(t, err, tt.member)
		ref := res.(protocol.CaptureTemplateResult).TemplateRef
		assert.True(t, strings.HasPrefix(ref, tt.prefix), "%s: %s", tt.member, ref)
		_, err = o.w.Handle(context.Background(), requestOf("environmentDeleteTemplate", `{`+o.base+`,"templateRef":"`+ref+`"}`))
		require.NoError(t, err)
	}
}

func TestIngressAndSyncParamsAreReadAsThePluginReadsThem(t *testing.T) {
	t.Parallel()
	o := newOddParamsWorld(t)
	o.run(t, []oddParamsCase{
		{name: "a path given as an array of one string; lease members the plugin never reads", method: "environmentRunnerIngressEndpoint",
			params: `"driverKey":1,"lease":{"providerLeaseId":"${LEASE}","metadata":"x","expiresAt":5},"port":43127.0,"path":["/api/runner/v1/connect/run-1"]`,
			want:   map[string]any{"kind": "authenticated_websocket"}},
		{name: "a lease that is a string has no providerLeaseId", method: "environmentRunnerIngressEndpoint",
			params: `"lease":"x","port":43127,"path":"/api/runner/v1/connect/run-1"`, err: msgIngressNeedsLease},
		{name: "a null lease: the plugin's read of its id throws", method: "environmentRunnerIngressEndpoint",
			params: `"lease":null,"port":43127,"path":"/api/runner/v1/connect/run-1"`, err: "Invalid params for environmentRunnerIngressEndpoint: params.lease must be an object"},
		{name: "no lease, after the port check that comes first", method: "environmentRunnerIngressEndpoint",
			params: `"port":1,"path":"/api/runner/v1/connect/run-1"`, err: msgIngressPort},
		{name: "a lease that is an array", method: "environmentRunnerIngressEndpoint",
			params: `"lease":["x"],"port":43127,"path":"/api/runner/v1/connect/run-1"`, err: msgIngressNeedsLease},
		{name: "a falsy lease id, before the config is read", method: "environmentRunnerIngressEndpoint", noBase: true,
			params: `{"config":null,"lease":{"providerLeaseId":false},"port":43127,"path":"/api/runner/v1/connect/run-1"}`, err: msgIngressNeedsLease},
		{name: "a numeric lease id", method: "environmentRunnerIngressEndpoint",
			params: `"lease":{"providerLeaseId":123},"port":43127,"path":"/api/runner/v1/connect/run-1"`, err: "Sandbox with ID or name 123 not found"},

		{name: "sync in, a lease that is a string", method: "environmentSyncIn", params: `"lease":"x","operations":[]`, err: msgSyncInNoLease},
		{name: "sync in, lease id 0", method: "environmentSyncIn",
			params: `"lease":{"providerLeaseId":0,"metadata":{"remoteCwd":"${CWD}"}},"operations":[]`, err: msgSyncInNoLease},
		{name: "sync out, metadata that is a string", method: "environmentSyncOut",
			params: `"lease":{"providerLeaseId":"${LEASE}","metadata":"x"},"operations":[]`, err: msgSyncNoRemoteDir},
		{name: "sync out, a numeric lease id", method: "environmentSyncOut",
			params: `"lease":{"providerLeaseId":123,"metadata":{"remoteCwd":"${CWD}"}},"operations":[]`, err: msgSandboxNotFound},
		{name: "sync in, an expiresAt the plugin never reads, key-only members of other types", method: "environmentSyncIn",
			params: `"driverKey":5,"companyId":["c"],"lease":{"providerLeaseId":"${LEASE}","metadata":{"remoteCwd":"${CWD}"},"expiresAt":1700000000000},"operations":[]`,
			want:   map[string]any{"operations": []any{}}},
	})
}

// A close is acknowledged with hostRouteId exactly as the host sent it,
// whatever its type, and never refused for the shape of its ids: the host
// retires a worker whose acknowledgement does not match what it sent.
func TestTerminalClosesEchoTheRouteAsSent(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	for _, method := range []string{"loginPtyClose", "duplexChannelClose"} {
		for params, want := range map[string]string{
			`{"hostRouteId":5}`:  `{"hostRouteId":5}`,
			`{"hostRouteId":""}`: `{"hostRouteId":""}`,
			`{}`:                 `{}`,
			`{"hostRouteId":null,"workerSessionId":5}`:        `{"hostRouteId":null}`,
			`{"hostRouteId":["d-1"]}`:                         `{"hostRouteId":["d-1"]}`,
			`{"hostRouteId":"r-1","workerSessionId":5,"x":1}`: `{"hostRouteId":"r-1"}`,
			`{"hostRouteId":"r-2","workerSessionId":null}`:    `{"hostRouteId":"r-2"}`,
			`"x"`: `{}`,
			`[1]`: `{}`,
		} {
			res, err := w.Handle(context.Background(), requestOf(method, params))
			require.NoError(t, err, "%s %s", method, params)
			b, err := json.Marshal(res)
			require.NoError(t, err)
			assert.JSONEq(t, want, string(b), "%s %s", method, params)
		}
		_, err := w.Handle(context.Background(), requestOf(method, ``))
		assert.Error(t, err, "%s without params: the plugin's read throws", method)
	}
}

// Ids that are no strings match no terminal; an open whose lease id is
// falsy or a number finds no sandbox.
func TestTerminalIDsThatAreNoStringsMatchNothing(t *testing.T) {
	t.Parallel()
	// No DAYTONA_API_KEY: an open of an unknown lease looks it up nowhere.
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Getenv: func(string) string { return "" }})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	const home = `"sessionHome":"/tmp/paperclip-adapter-login/0b7a1c9e-1111-4222-8333-944455556666"`
	tests := []struct{ method, params, err string }{
		{"loginPtyInput", `{"workerSessionId":5,"data":"abc"}`, `Daytona login pseudo-terminal: session "" is not open`},
		{"loginPtyStop", `{"workerSessionId":["pty-x"]}`, `Daytona login pseudo-terminal: session "" is not open`},
		{"duplexChannelWrite", `{"hostRouteId":1,"workerSessionId":2,"data":"aGk="}`, `Daytona duplex channel: route "" with session "" is not open`},
		{"duplexChannelStop", `{"hostRouteId":1,"workerSessionId":null}`, `Daytona duplex channel: route "" with session "" is not open`},
		{"loginPtyOpen", `{"hostRouteId":"r-9","providerLeaseId":0,"loginCommandKey":"claude",` + home + `}`, msgNoLoginSandbox},
		{"loginPtyOpen", `{"hostRouteId":"r-10","driverKey":1,"companyId":2,"environmentId":null,"providerLeaseId":123,"loginCommandKey":"claude",` + home + `}`, msgNoLoginSandbox},
		{"loginPtyOpen", `{"hostRouteId":"r-11","providerLeaseId":"x","loginCommandKey":["claude"],` + home + `}`, "LOGIN_PTY_DESCRIPTOR_REJECTED"},
		{"duplexChannelOpen", `{"hostRouteId":"d-9","providerLeaseId":false,"command":["cat"]}`, msgNoDuplexSandbox},
		// Row terminal-route-not-a-string: the SDK would drop every
		// notification of such a route.
		{"loginPtyOpen", `{"hostRouteId":5,"providerLeaseId":"x","loginCommandKey":"claude",` + home + `}`,
			"Invalid params for loginPtyOpen: params.hostRouteId must be a string, not a JSON number"},
		{"duplexChannelOpen", `{"hostRouteId":"","providerLeaseId":"x","command":["cat"]}`,
			"Invalid params for duplexChannelOpen: params.hostRouteId must be a non-empty string"},
		{"duplexChannelOpen", `{"hostRouteId":"d-10","companyId":2,"providerLeaseId":7,"command":["cat"]}`, msgNoDuplexSandbox},
	}
	for _, tt := range tests {
		_, err := w.Handle(context.Background(), requestOf(tt.method, tt.params))
		assert.EqualError(t, err, tt.err, "%s %s", tt.method, tt.params)
	}
}

// Inside a sync's operations the plugin applies a file's `mode` only when it
// is a number (a string is ignored: Number("0600") would be the mode
// 0o1130), tests a directory's `mode & 0o222` (any value, null included),
// does arithmetic on a post-upload command's `timeoutMs` (so a numeric
// string works) and tests `followSymlinks` for truthiness; `operations`
// itself must be iterable.
func TestSyncOperationMembersAreCoercedAsThePluginDoes(t *testing.T) {
	t.Parallel()
	o := newOddParamsWorld(t)
	src := filepath.Join(t.TempDir(), "auth.json")
	require.NoError(t, os.WriteFile(src, []byte("secret"), 0o644))
	dir := filepath.Join(t.TempDir(), "tree")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "real.txt"), []byte("real"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(dir, "real.txt"), filepath.Join(dir, "link.txt")))
	ops := fmt.Sprintf(`"lease":{"providerLeaseId":"${LEASE}","metadata":{"remoteCwd":"${CWD}"}},"operations":[{"operationId":"op-1","files":[`+
		`{"sourcePath":%q,"targetPath":"${CWD}/auth.json","kind":"file","mode":"384"},`+
		`{"sourcePath":%q,"targetPath":"${CWD}/secret.json","kind":"file","mode":384},`+
		`{"sourcePath":%q,"targetPath":"${CWD}/octal.json","kind":"file","mode":"0600"},`+
		`{"sourcePath":%q,"targetPath":"${CWD}/deref","kind":"directory","followSymlinks":"yes"}],`+
		`"postUploadCommands":[{"command":"test -f auth.json","timeoutMs":"5000"},{"command":"true","timeoutMs":"soon"}]}]`, src, src, src, dir)
	o.run(t, []oddParamsCase{
		{name: "a mode and a timeout given as strings, a truthy followSymlinks", method: "environmentSyncIn", params: ops},
		{name: "operations absent", method: "environmentSyncIn",
			params: `"lease":{"providerLeaseId":"${LEASE}","metadata":{"remoteCwd":"${CWD}"}}`,
			err:    "Invalid params for environmentSyncIn: params.operations must be an array"},
		{name: "operations null", method: "environmentSyncOut",
			params: `"lease":{"providerLeaseId":"${LEASE}","metadata":{"remoteCwd":"${CWD}"}},"operations":null`,
			err:    "Invalid params for environmentSyncOut: params.operations must be an array"},
	})
	cwd := o.vars.Replace("${CWD}")
	fi, err := os.Stat(filepath.Join(cwd, "auth.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), `mode "384" is ignored: the upload's own mode`)
	fi, err = os.Stat(filepath.Join(cwd, "octal.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), `mode "0600" is ignored, not Number("0600"), 0o1130`)
	assert.Zero(t, fi.Mode()&os.ModeSticky, `mode "0600" is ignored, not Number("0600"), 0o1130`)
	fi, err = os.Stat(filepath.Join(cwd, "secret.json"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "mode 384 is 0o600")
	fi, err = os.Lstat(filepath.Join(cwd, "deref", "link.txt"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "followSymlinks \"yes\" dereferences the link (tar -h)")
}
