package worker

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// Members the plugin never reads cannot fail a call, whatever their type:
// issueId outside acquire, an acquire's workspaceMode, requestedCwd,
// executionWorkspaceSettings and driverKey (a cache key only), a
// workspace's mode and metadata, a probe's driverKey and issueId; nor can a
// call timeout JSON.parse reads as Infinity. A probe's label value that is
// no string fails the probe (ok:false, as Daytona refuses the plugin's),
// after the checks the plugin makes before its create.
func TestMembersThePluginDoesNotReadCannotFailACall(t *testing.T) {
	t.Parallel()
	env, w, l := leaseOnEmulator(t, emulator.Options{})
	cfg := fmt.Sprintf(`{"apiKey":%q,"apiUrl":%q}`, env.APIKey, env.APIURL)
	call := func(method, params string) (map[string]any, error) {
		t.Helper()
		res, err := w.Handle(t.Context(), requestOf(method, params))
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(res)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m, nil
	}
	odd := `"driverKey":"daytona","companyId":"c","environmentId":"e","issueId":5,"config":` + cfg
	gone := `"00000000-0000-4000-8000-00000000dead"`

	m, err := call(protocol.MethodEnvironmentExecute, `{`+odd+`,"lease":{"providerLeaseId":"`+l.id+`"},"command":"echo","args":["ran"],"timeoutMs":1e400}`)
	require.NoError(t, err)
	assert.Equal(t, "ran\n", m["stdout"], "%v", m)
	m, err = call(protocol.MethodEnvironmentRealizeWorkspace, `{`+odd+`,"lease":{"providerLeaseId":null},"workspace":{"remotePath":"/r","mode":5,"metadata":"x"}}`)
	require.NoError(t, err)
	assert.Equal(t, "/r", m["cwd"])
	m, err = call(protocol.MethodEnvironmentResumeLease, `{`+odd+`,"providerLeaseId":`+gone+`}`)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"expired": true}, m["metadata"])
	m, err = call(protocol.MethodEnvironmentReleaseLease, `{`+odd+`,"providerLeaseId":`+gone+`}`)
	require.NoError(t, err)
	assert.Equal(t, "destroyed", m["state"])

	m, err = call(protocol.MethodEnvironmentAcquireLease, `{"driverKey":5,"companyId":"c","environmentId":"e","issueId":5,"runId":"r","config":`+cfg+
		`,"workspaceMode":5,"requestedCwd":{},"executionWorkspaceSettings":"x"}`)
	require.NoError(t, err)
	id, _ := m["providerLeaseId"].(string)
	require.NotEmpty(t, id)
	_, err = call(protocol.MethodEnvironmentDestroyLease, `{"driverKey":5,"companyId":"c","environmentId":"e","config":`+cfg+`,"providerLeaseId":"`+id+`"}`)
	require.NoError(t, err)

	m, err = call(protocol.MethodEnvironmentProbe, `{"driverKey":5,"companyId":"c","environmentId":"e","issueId":[1],"config":`+cfg+`}`)
	require.NoError(t, err)
	assert.Equal(t, true, m["ok"], "%v", m)
	for _, tc := range []struct{ members, want string }{
		{`"companyId":5,"environmentId":"e","config":` + cfg, "params.companyId must be a string, not a JSON number"},
		{`"companyId":"c","environmentId":{},"config":` + cfg, "params.environmentId must be a string, not a JSON object"},
		{`"companyId":5,"config":{"cpu":2}`, config.MsgRuntimeResourcesNeedImage},
	} {
		m, err = call(protocol.MethodEnvironmentProbe, `{`+tc.members+`}`)
		require.NoError(t, err, tc.members)
		assert.Equal(t, false, m["ok"], tc.members)
		assert.Equal(t, tc.want, m["metadata"].(map[string]any)["error"], tc.members)
	}

	// A label value that is no string fails an acquire (Daytona refuses
	// the plugin's), named as the JSON member.
	_, err = call(protocol.MethodEnvironmentAcquireLease, `{"companyId":5,"environmentId":"e","runId":"r","config":`+cfg+`}`)
	assert.EqualError(t, err, "Invalid params for environmentAcquireLease: params.companyId must be a string, not a JSON number")
}
