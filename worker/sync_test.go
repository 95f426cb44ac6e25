package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
	filesync "github.com/paperclipai/daytona-worker/sync"
	"github.com/paperclipai/daytona-worker/worker/config"
)

const syncRemote = "/home/daytona/paperclip-workspace"

// writableDirsFor is the plugin's __getDaytonaWritableDirsForTest: the
// advisory writable set recorded for the scope a sync-in's params name.
func writableDirsFor(t *testing.T, w *Worker, raw string) []string {
	t.Helper()
	var p protocol.SyncParams
	require.NoError(t, json.Unmarshal([]byte(raw), &p))
	rc, err := config.DecodeRaw(p.Config)
	require.NoError(t, err)
	sc, err := w.scopeFor(p.DriverBaseParams, *p.Lease.ProviderLeaseID, config.Parse(rc))
	require.NoError(t, err)
	return w.syncs.writableDirs(sc.key())
}

// syncInParams builds sync-in params whose Daytona is unreachable: the
// writable set is recorded before the sandbox is looked up.
func syncInParams(files string) string {
	return `{"driverKey":"daytona","companyId":"c","environmentId":"e",` +
		`"config":{"apiKey":"host-key","apiUrl":"http://127.0.0.1:1/api","timeoutMs":300000,"reuseLease":false},` +
		`"lease":{"providerLeaseId":"sandbox-123","metadata":{"provider":"daytona","remoteCwd":"` + syncRemote + `"}},` +
		`"operations":[{"operationId":"op","files":` + files + `}]}`
}

// The plugin's tests of the advisory writable set (file-sync-tests §13.1).
func TestSyncInRecordsTheAdvisoryWritableSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files string
		want  []string
	}{
		{"a staging tarball records its writablePath, not the staging parent",
			`[{"sourcePath":"/h/workspace.tar","targetPath":"` + syncRemote + `/.paperclip-runtime/workspace-upload.tar","kind":"file","access":"rw","writablePath":"` + syncRemote + `"}]`,
			[]string{syncRemote}},
		{"an rw mapping without writablePath records its target's parent",
			`[{"sourcePath":"/h/in-place.txt","targetPath":"` + syncRemote + `/data/in-place.txt","kind":"file","access":"rw"}]`,
			[]string{syncRemote + "/data"}},
		{"ro and access-absent mappings are skipped",
			`[{"sourcePath":"/h/p","targetPath":"` + syncRemote + `/.paperclip-runtime/project-proj-first","kind":"directory","access":"ro"},` +
				`{"sourcePath":"/h/d.tar","targetPath":"` + syncRemote + `/.paperclip-runtime/default-upload.tar","kind":"file"}]`,
			[]string{}},
		{"a trailing slash is ignored, as Node's dirname does, and sets hold each once",
			`[{"sourcePath":"/h/a","targetPath":"` + syncRemote + `/a/b/","kind":"directory","access":"rw"},` +
				`{"sourcePath":"/h/c","targetPath":"` + syncRemote + `/a/c","kind":"file","access":"rw"}]`,
			[]string{syncRemote + "/a"}},
	}
	for _, tt := range tests {
		w := New(discardHost{}, Options{Logger: zerolog.Nop()})
		raw := syncInParams(tt.files)
		// A cancelled call: the set is recorded before the sandbox lookup fails.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := w.Handle(ctx, &rpc.Request{Method: protocol.MethodEnvironmentSyncIn, Params: json.RawMessage(raw)})
		require.Error(t, err, "Daytona is unreachable")
		assert.Equal(t, tt.want, writableDirsFor(t, w, raw), tt.name)
	}
	// Sync out records nothing.
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	raw := syncInParams(`[{"sourcePath":"` + syncRemote + `/x","targetPath":"/h/x","kind":"file","access":"rw"}]`)
	_, _ = w.Handle(context.Background(), &rpc.Request{Method: protocol.MethodEnvironmentSyncOut, Params: json.RawMessage(raw)})
	assert.Empty(t, writableDirsFor(t, w, raw))
}

func TestIsLoopbackURL(t *testing.T) {
	api := func(s string) *string { return &s }
	assert.True(t, isLoopbackURL("http://127.0.0.1:4000/toolbox", nil))
	assert.True(t, isLoopbackURL("http://localhost/toolbox", nil))
	assert.True(t, isLoopbackURL("http://[::1]:80/x", nil))
	assert.True(t, isLoopbackURL("", api("http://127.0.0.2:3000/api")))
	assert.False(t, isLoopbackURL("https://proxy.app.daytona.io/toolbox", api("http://127.0.0.1/api")))
	assert.False(t, isLoopbackURL("", nil))
	assert.False(t, isLoopbackURL("", api("https://app.daytona.io/api")))
}

// A mapping's mode as the plugin reads it: a file's only when it is a
// number (`typeof mode === "number"`, in both directions); a directory's
// whenever present, as ToInt32(Number(mode)) for its `mode & 0o222` test
// (null, NaN and booleans included).
func TestSyncModesAreReadAsThePluginReadsThem(t *testing.T) {
	t.Parallel()
	mode := func(m int64) *int64 { return &m }
	tests := []struct {
		mapping string
		want    *int64
	}{
		{`{"kind":"file","mode":384}`, mode(384)},
		{`{"kind":"file","mode":-1}`, mode(-1)},
		{`{"kind":"file","mode":"384"}`, nil},
		{`{"kind":"file","mode":"0600"}`, nil},
		{`{"kind":"file","mode":null}`, nil},
		{`{"kind":"file","mode":true}`, nil},
		{`{"kind":"file"}`, nil},
		{`{"mode":"0600"}`, nil},
		{`{"kind":"directory","mode":365}`, mode(365)},
		{`{"kind":"directory","mode":"0644"}`, mode(644)},
		{`{"kind":"directory","mode":"abc"}`, mode(0)},
		{`{"kind":"directory","mode":null}`, mode(0)},
		{`{"kind":"directory","mode":true}`, mode(1)},
		{`{"kind":"directory","mode":[]}`, mode(0)},
		{`{"kind":"directory"}`, nil},
		{`{"kind":"\u0064irectory","mode":null}`, mode(0)},
	}
	for _, tt := range tests {
		raw := syncInParams(`[` + tt.mapping + `]`)
		var p protocol.SyncParams
		require.NoError(t, decodeDriverParams(protocol.MethodEnvironmentSyncIn, json.RawMessage(raw), &p, syncParamsPreparer(protocol.MethodEnvironmentSyncIn, new(any))), tt.mapping)
		ops, err := syncOperations(protocol.MethodEnvironmentSyncIn, p.Operations)
		require.NoError(t, err, tt.mapping)
		assert.Equal(t, tt.want, ops[0].Files[0].Mode, tt.mapping)
	}
}

// Mapping members the plugin reads leniently never fail the call: a kind
// that is not a string drops the mapping, an access that is not a string is not
// "rw", a writablePath is only an advisory value, and only a directory's
// exclude is read ([...exclude]: a string gives its characters).
func TestSyncMappingMembersAreReadAsThePluginReadsThem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mapping string
		check   func(t *testing.T, m filesync.Mapping)
	}{
		{`{"kind":5}`, func(t *testing.T, m filesync.Mapping) { assert.Equal(t, "", m.Kind) }},
		{`{"kind":{"a":1},"access":"rw"}`, func(t *testing.T, m filesync.Mapping) { assert.Equal(t, "", m.Kind) }},
		{`{"kind":"file","exclude":5}`, func(t *testing.T, m filesync.Mapping) { assert.Nil(t, m.Exclude) }},
		{`{"kind":"file","exclude":[5,{}]}`, func(t *testing.T, m filesync.Mapping) { assert.Nil(t, m.Exclude) }},
		{`{"kind":"directory","exclude":null}`, func(t *testing.T, m filesync.Mapping) { assert.Nil(t, m.Exclude) }},
		{`{"kind":"directory","exclude":"a*ü"}`, func(t *testing.T, m filesync.Mapping) { assert.Equal(t, []string{"a", "*", "ü"}, m.Exclude) }},
		{`{"kind":"directory","exclude":["*.log"]}`, func(t *testing.T, m filesync.Mapping) { assert.Equal(t, []string{"*.log"}, m.Exclude) }},
		{`{"kind":"file","access":5}`, func(t *testing.T, m filesync.Mapping) { assert.Equal(t, "", m.Access) }},
		{`{"kind":"file","access":"rw","writablePath":5}`, func(t *testing.T, m filesync.Mapping) {
			require.NotNil(t, m.WritablePath)
			assert.Equal(t, "5", *m.WritablePath)
		}},
		{`{"kind":"file","access":"rw","writablePath":null}`, func(t *testing.T, m filesync.Mapping) { assert.Nil(t, m.WritablePath) }},
	}
	for _, tt := range tests {
		mapping := strings.Replace(tt.mapping, "{", `{"sourcePath":"/h/a","targetPath":"`+syncRemote+`/a",`, 1)
		raw := syncInParams(`[` + mapping + `]`)
		var p protocol.SyncParams
		require.NoError(t, decodeDriverParams(protocol.MethodEnvironmentSyncIn, json.RawMessage(raw), &p, syncParamsPreparer(protocol.MethodEnvironmentSyncIn, new(any))), tt.mapping)
		ops, err := syncOperations(protocol.MethodEnvironmentSyncIn, p.Operations)
		require.NoError(t, err, tt.mapping)
		tt.check(t, ops[0].Files[0])
	}
}

// A sync-out file's numeric mode goes to the plugin's fs.chmod, which
// refuses one that is not an integer in [0, 2^32-1] with these words (Node 20).
func TestNodeFileModeError(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{
		420.5:      `The value of "mode" is out of range. It must be an integer. Received 420.5`,
		-1:         `The value of "mode" is out of range. It must be >= 0 && <= 4294967295. Received -1`,
		4294967296: `The value of "mode" is out of range. It must be >= 0 && <= 4294967295. Received 4294967296`,
		5e9:        `The value of "mode" is out of range. It must be >= 0 && <= 4294967295. Received 5_000_000_000`,
		-5e9:       `The value of "mode" is out of range. It must be >= 0 && <= 4294967295. Received -5_000_000_000`,
		1e21:       `The value of "mode" is out of range. It must be >= 0 && <= 4294967295. Received 1e_+21`,
		1.5e-7:     `The value of "mode" is out of range. It must be an integer. Received 1.5e-7`,
		-0.5:       `The value of "mode" is out of range. It must be an integer. Received -0.5`,
		0:          "",
		384:        "",
		0o100644:   "",
		4294967295: "",
	} {
		err := nodeFileModeError(in)
		if want == "" {
			assert.NoError(t, err, "%v", in)
		} else {
			assert.EqualError(t, err, want, "%v", in)
		}
	}
	// Only a sync-out file mapping's mode reaches fs.chmod.
	raw := `{"driverKey":"daytona","companyId":"c","environmentId":"e","config":{},"lease":{"providerLeaseId":"s","metadata":{"remoteCwd":"/w"}},` +
		`"operations":[{"operationId":"op","files":[{"sourcePath":"/w/a","targetPath":"/h/a","kind":"file","mode":-1}]}]}`
	var p protocol.SyncParams
	require.NoError(t, decodeDriverParams(protocol.MethodEnvironmentSyncOut, json.RawMessage(raw), &p, syncParamsPreparer(protocol.MethodEnvironmentSyncOut, new(any))))
	_, err := syncOperations(protocol.MethodEnvironmentSyncOut, p.Operations)
	assert.EqualError(t, err, `The value of "mode" is out of range. It must be >= 0 && <= 4294967295. Received -1`)
	_, err = syncOperations(protocol.MethodEnvironmentSyncIn, p.Operations)
	assert.NoError(t, err, "a sync-in mode is (mode & 0o7777).toString(8): any number")
}

// A null mapping or post-upload command is one the plugin reads members of
// (a TypeError there): refused as invalid params before anything moves,
// where it would decode as an empty one (an empty command sent to Daytona).
func TestSyncRefusesNullEntries(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	for _, tt := range []struct{ ops, want string }{
		{`[{"operationId":"op","files":[null]}]`, "params.operations[0].files[0] must be an object"},
		{`[{"operationId":"op","files":[],"postUploadCommands":[{"command":"true"},null]}]`, "params.operations[0].postUploadCommands[1] must be an object"},
		{`[{"operationId":"a","files":[]},{"operationId":"b","files":[{"kind":"file"},null]}]`, "params.operations[1].files[1] must be an object"},
	} {
		for _, method := range []string{protocol.MethodEnvironmentSyncIn, protocol.MethodEnvironmentSyncOut} {
			raw := `{"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":"k","apiUrl":"http://127.0.0.1:1/api"},` +
				`"lease":{"providerLeaseId":"s","metadata":{"remoteCwd":"/w"}},"operations":` + tt.ops + `}`
			_, err := w.Handle(context.Background(), requestOf(method, raw))
			require.Error(t, err, tt.ops)
			var rpcErr *protocol.Error
			require.True(t, errors.As(err, &rpcErr), "%v", err)
			assert.Equal(t, protocol.CodeInvalidParams, rpcErr.Code)
			assert.Equal(t, "Invalid params for "+method+": "+tt.want, err.Error())
		}
	}
}
