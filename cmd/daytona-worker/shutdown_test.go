package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/testutil"
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
				require.NoError(t, s.p.CloseStdin())
			}
			code := waitExit(t, s.p)
			assert.Equal(t, 0, code)
			took := time.Since(start)
			t.Logf("exited after %s", took)
			assert.Less(t, took, 8*time.Second, "past what the host's drain allows, with a margin")

			for _, sb := range env.Server.Sandboxes() {
				assert.Equal(t, "destroyed", sb.DesiredState, "sandbox %s (%s) left behind; stderr: %s", sb.ID, sb.State, s.p.Stderr())
			}
			require.NoError(t, waitForNoSandboxes(env, 10*time.Second))
		})
	}
}

// A shutdown that cancels an execute answers that execute before its own
// reply, also when the execute's cleanup after the cancellation is slow (a
// Daytona that takes seconds to remove the command's stdin file): the host
// gets exactly one reply for every request it sent before the shutdown.
func TestShutdownAnswersAnExecuteWhoseCleanupIsSlow(t *testing.T) {
	for _, bypass := range []bool{false, true} {
		t.Run(fmt.Sprintf("bypass=%v", bypass), func(t *testing.T) {
			t.Parallel()
			env := startEmulator(t, emulator.Options{})
			h := startHost(t, hostOptions{})
			l := h.acquire(leaseConfig(env, ""))
			marker := randomToken("slow-cleanup")
			p, inv := h.start(l, cmdSpec{command: "sh", args: []string{"-c", "echo started; sleep 30; true", marker}, stdin: strp("input"), bypass: bypass})
			if bypass {
				require.True(t, testutil.Eventually(30*time.Second, func() bool { return len(processesWith(marker)) > 0 }), "the command never started")
			} else {
				h.waitForLog(inv, "started\n")
			}
			// The stdin file's delete (and anything else under /files) now
			// takes 3 s, well past the 500 ms a cancelled handler gets.
			env.Server.AddFault(emulator.Fault{Method: "DELETE", Path: `/files`, Latency: 3 * time.Second})
			stop := h.call("shutdown", map[string]any{}, "")
			r := stop.wait()
			assert.Nil(t, r.Error)
			exec := h.replyTime(p)
			assert.False(t, exec.IsZero(), "the shutdown was answered, the execute it cancelled never was")
			if !exec.IsZero() {
				assert.False(t, exec.After(r.At), "the execute's reply came after the shutdown's")
			}
			h.hangUp()
			h.mu.Lock()
			assert.Empty(t, h.unexpected, "a second reply, or another surprise")
			h.mu.Unlock()
		})
	}
}
