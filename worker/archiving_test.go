package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// A lease whose sandbox Daytona is archiving (auto-archive of a stopped
// sandbox, or an archive-on-release) is at rest with its files, and Daytona
// accepts a start meanwhile (the archive is abandoned). A call that needs
// the sandbox started starts it at once, as the plugin's start does, instead
// of waiting for an archive that may take longer than the call's timeout; a
// release that keeps the lease, or a stop that retains it, leaves it where
// it is instead of asking Daytona to stop it (409) and then deleting it.
func TestArchivingLeaseSandbox(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		method string
		params string // after the base members
		want   string // the result, "$ID" for the lease id; "" = an execute's exit 0
		state  string // the sandbox's state afterwards
	}{
		{"execute", "environmentExecute", `,"lease":{"providerLeaseId":"$ID"},"command":"echo","args":["hi"]`, "", "started"},
		{"resume", "environmentResumeLease", `,"providerLeaseId":"$ID","lease":{"providerLeaseId":"$ID"}`, "", "started"},
		{"release of a reusable lease", "environmentReleaseLease", `,"providerLeaseId":"$ID"`,
			`{"providerLeaseId":"$ID","state":"stopped"}`, "archiving"},
		{"stop and retain", "environmentReleaseLease", `,"providerLeaseId":"$ID","resourceDisposition":"stop_and_retain"`,
			`{"providerLeaseId":"$ID","state":"stopped"}`, "archiving"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Archiving never ends here: a call that waits for it runs into
			// its timeout (5 s).
			env, w, l := leaseOnEmulator(t, emulator.Options{ArchiveDelay: time.Hour}, `"reuseLease":true`)
			base := strings.Replace(l.base, `"timeoutMs":60000`, `"timeoutMs":5000`, 1)
			require.NotEqual(t, l.base, base)
			require.NoError(t, env.Server.StopBehindClientsBack(l.id))
			client := emulatorClient(t, env)
			sb, err := client.Archive(t.Context(), l.id)
			require.NoError(t, err)
			require.Equal(t, daytona.StateArchiving, sb.State)

			res, err := w.Handle(t.Context(), requestOf(tc.method, `{`+base+strings.ReplaceAll(tc.params, "$ID", l.id)+`}`))
			require.NoError(t, err, "%s of an archiving sandbox", tc.method)
			switch {
			case tc.method == "environmentExecute":
				assert.Contains(t, resultJSON(t, res), `"exitCode":0,`)
			case tc.want != "":
				assert.JSONEq(t, strings.ReplaceAll(tc.want, "$ID", l.id), resultJSON(t, res))
			}
			view, ok := env.Server.Sandbox(l.id)
			require.True(t, ok, "the lease's sandbox is gone")
			assert.Equal(t, tc.state, view.State)
		})
	}
}
