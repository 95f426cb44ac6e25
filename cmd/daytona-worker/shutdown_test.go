package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// A worker told to stop (shutdown, or the end of its input) while an acquire
// waits for Daytona to create its sandbox deletes that sandbox before it
// exits, well inside the host's 10 s drain; on shutdown the acquire's error
// reaches the host before the shutdown reply.
func TestStopDuringAcquireDeletesItsSandbox(t *testing.T) {
	for _, how := range []string{"shutdown", "eof"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			// Still creating when the 2 s grace ends; settles at 3 s.
			env := startEmulator(t, emulator.Options{StepDelay: 3 * time.Second, ReturnTransitional: true})
			s := newSession(t, nil)
			s.initialize()
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"acq","method":"environmentAcquireLease","params":`+
				`{"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","config":%s}}`, leaseConfig(env, "")))
			require.Eventually(t, func() bool { return len(env.Server.Sandboxes()) == 1 }, 30*time.Second, 10*time.Millisecond)

			start := time.Now()
			switch how {
			case "shutdown":
				s.send(`{"jsonrpc":"2.0","id":"stop","method":"shutdown"}`)
				acq := s.recv()
				assert.Equal(t, "acq", acq["id"])
				require.Contains(t, acq, "error", "the acquire succeeded: %v", acq)
				assert.Contains(t, acq["error"].(map[string]any)["message"], "shutting down")
				stop := s.recv()
				assert.Equal(t, "stop", stop["id"])
				assert.Contains(t, stop, "result")
			case "eof":
				require.NoError(t, s.p.stdin.Close())
			}
			code, err := s.p.Wait()
			require.NoError(t, err)
			assert.Equal(t, 0, code)
			took := time.Since(start)
			t.Logf("exited after %s", took)
			assert.Less(t, took, 8*time.Second, "past what the host's drain allows, with a margin")

			for _, sb := range env.Server.Sandboxes() {
				assert.Equal(t, "destroyed", sb.DesiredState, "sandbox %s (%s) left behind; stderr: %s", sb.ID, sb.State, s.p.stderr.String())
			}
			require.NoError(t, waitForNoSandboxes(env, 10*time.Second))
		})
	}
}
