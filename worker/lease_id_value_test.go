package worker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/protocol"
)

// A provider lease id that is no string is used as the plugin uses it: the
// SDK looks it up by its String() (GET /sandbox/5), a receipt echoes it as
// sent, its state is kept apart from the string's, and the handle check
// (sandbox.id !== providerLeaseId) refuses any sandbox the lookup finds.
func TestLeaseIDsThatAreNoStringAreUsedAsThePluginUsesThem(t *testing.T) {
	t.Parallel()
	_, w, l := leaseOnEmulator(t, emulator.Options{})
	call := func(method, members string) (string, error) {
		t.Helper()
		res, err := w.Handle(t.Context(), requestOf(method, `{`+l.base+`,`+members+`}`))
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(res)
		require.NoError(t, err)
		return string(b), nil
	}
	mismatch := "Daytona sandbox handle mismatch: handle " + l.id + " does not belong to lease " + l.id + "."

	for _, tc := range []struct {
		method, members, result, err string
	}{
		// The setup, template and ingress methods read the id alike: an
		// array or an object is looked up by its String(), not refused.
		{protocol.MethodEnvironmentGetInteractiveSetup, `"providerLeaseId":["` + l.id + `"]`, "", mismatch},
		{protocol.MethodEnvironmentCaptureTemplate, `"providerLeaseId":["` + l.id + `"],"timeoutMs":5000`, "", mismatch},
		{protocol.MethodEnvironmentRunnerIngressEndpoint, `"port":43127,"path":"/api/runner/v1/connect/t","lease":{"providerLeaseId":["` + l.id + `"]}`, "", mismatch},
		// (A cancel closes the lease it names: [[id]] is not [id].)
		{protocol.MethodEnvironmentCancelInteractiveSetup, `"providerLeaseId":[["` + l.id + `"]]`, "", mismatch},
		{protocol.MethodEnvironmentGetInteractiveSetup, `"providerLeaseId":{"a":1}`, `{"providerLeaseId":null,"status":"missing","connectionSummary":null,"connectionPayload":null,"metadata":{"provider":"daytona","missing":true}}`, ""},
		{protocol.MethodEnvironmentCancelInteractiveSetup, `"providerLeaseId":["a","b"]`, `{"status":"missing","metadata":{"provider":"daytona","missing":true,"reason":null}}`, ""},
		{protocol.MethodEnvironmentCaptureTemplate, `"providerLeaseId":{"a":1},"timeoutMs":5000`, "", "Sandbox with ID or name [object Object] not found"},
		{protocol.MethodEnvironmentRunnerIngressEndpoint, `"port":43127,"path":"/api/runner/v1/connect/t","lease":{"providerLeaseId":[1]}`, "", "Sandbox with ID or name 1 not found"},
		{protocol.MethodEnvironmentReleaseLease, `"providerLeaseId":5`, `{"providerLeaseId":5,"state":"destroyed"}`, ""},
		{protocol.MethodEnvironmentReleaseLease, `"providerLeaseId":5.50`, `{"providerLeaseId":5.5,"state":"destroyed"}`, ""},
		{protocol.MethodEnvironmentDestroyLease, `"providerLeaseId":true`, `{"providerLeaseId":true,"state":"destroyed"}`, ""},
		{protocol.MethodEnvironmentDestroyLease, `"providerLeaseId":{"z":1,"a":[null,2]}`, `{"providerLeaseId":{"z":1,"a":[null,2]},"state":"destroyed"}`, ""},
		{protocol.MethodEnvironmentStopLease, `"providerLeaseId":["x"]`, "", "Daytona sandbox x no longer exists, so it cannot be stopped and retained."},
		// Found by its String(), refused by the handle check (and a
		// teardown closes the lease [id] for later calls, as any teardown).
		{protocol.MethodEnvironmentExecute, `"lease":{"providerLeaseId":["` + l.id + `"]},"command":"true"`, "", mismatch},
		{protocol.MethodEnvironmentRealizeWorkspace, `"lease":{"providerLeaseId":["` + l.id + `"]},"workspace":{}`, "", mismatch},
		{protocol.MethodEnvironmentDestroyLease, `"providerLeaseId":["` + l.id + `"]`, "", mismatch},
		{protocol.MethodEnvironmentReleaseLease, `"providerLeaseId":["` + l.id + `"]`, "", mismatch},
		{protocol.MethodEnvironmentExecute, `"lease":{"providerLeaseId":["` + l.id + `"]},"command":"true"`, "", "Daytona sandbox lease " + l.id + " is no longer active."},
		{protocol.MethodEnvironmentResumeLease, `"providerLeaseId":["` + l.id + `"]`, "", mismatch},
		// Not found: a resume looks up falsy ids too (only null fails the
		// SDK), and a blank one.
		{protocol.MethodEnvironmentResumeLease, `"providerLeaseId":7`, `{"providerLeaseId":null,"metadata":{"expired":true}}`, ""},
		{protocol.MethodEnvironmentResumeLease, `"providerLeaseId":0`, `{"providerLeaseId":null,"metadata":{"expired":true}}`, ""},
		{protocol.MethodEnvironmentResumeLease, `"providerLeaseId":false`, `{"providerLeaseId":null,"metadata":{"expired":true}}`, ""},
		{protocol.MethodEnvironmentResumeLease, `"providerLeaseId":" "`, `{"providerLeaseId":null,"metadata":{"expired":true}}`, ""},
		{protocol.MethodEnvironmentExecute, `"lease":{"providerLeaseId":{"id":1}},"command":"true"`, "", "Sandbox with ID or name [object Object] not found"},
		// The release of 5 above closed the lease 5, not the lease "5".
		{protocol.MethodEnvironmentRealizeWorkspace, `"lease":{"providerLeaseId":5},"workspace":{}`, "", "Daytona sandbox lease 5 is no longer active."},
		{protocol.MethodEnvironmentRealizeWorkspace, `"lease":{"providerLeaseId":"5"},"workspace":{}`, "", "Sandbox with ID or name 5 not found"},
	} {
		got, err := call(tc.method, tc.members)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, "%s %s", tc.method, tc.members)
			continue
		}
		if assert.NoError(t, err, "%s %s", tc.method, tc.members) {
			assert.JSONEq(t, tc.result, got, "%s %s", tc.method, tc.members)
		}
	}

	// None of that touched the lease's sandbox.
	got, err := call(protocol.MethodEnvironmentExecute, `"lease":{"providerLeaseId":"`+l.id+`"},"command":"echo","args":["alive"]`)
	require.NoError(t, err)
	assert.Contains(t, got, `"stdout":"alive\n"`)
}
