package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/protocol"
)

// Close while a sandbox is being created (acquire, probe, interactive setup)
// cancels the creation, lets it delete its sandbox, and returns within its
// bound. A sandbox that Daytona keeps creating past the bound cannot be
// deleted in time: the acquire then reports it with the creation-cleanup
// envelope before Close returns.
func TestCloseWaitsForTheCleanupOfSandboxesBeingCreated(t *testing.T) {
	t.Parallel()
	// The creation grace is shortened and the emulator's steps wait for the
	// test to move its clock, so nothing here waits on them in real time.
	const (
		bound = time.Second
		grace = 50 * time.Millisecond
		step  = 3 * time.Second
	)
	type outcome struct {
		res any
		err error
	}
	tests := []struct {
		name      string
		method    string
		stepDelay time.Duration // creating → started, and destroying → gone
		stuck     bool          // still creating when Close gives up
	}{
		// Still creating at the creation grace, settled (once the clock
		// moves) well before the bound.
		{name: "acquire", method: protocol.MethodEnvironmentAcquireLease, stepDelay: step},
		{name: "probe", method: protocol.MethodEnvironmentProbe, stepDelay: step},
		{name: "interactive setup", method: protocol.MethodEnvironmentStartInteractiveSetup, stepDelay: step},
		{name: "acquire of a sandbox that never settles", method: protocol.MethodEnvironmentAcquireLease, stepDelay: time.Hour, stuck: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := emulatortest.Start(t, emulator.Options{StepDelay: tt.stepDelay, ReturnTransitional: true, ClockTimers: true})
			w := New(discardHost{}, Options{Logger: zerolog.Nop(), Timing: Timing{CreationGrace: grace}})
			params := fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","sessionId":"s",`+
				`"config":{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000}}`, env.APIKey, env.APIURL)
			done := make(chan outcome, 1)
			go func() {
				res, err := w.Handle(context.Background(), requestOf(tt.method, params))
				done <- outcome{res, err}
			}()
			require.Eventually(t, func() bool { return len(env.Server.Sandboxes()) == 1 }, 10*time.Second, 10*time.Millisecond)

			if !tt.stuck {
				// The sandbox settles once Close has given up on the
				// creation, as a slow one does after the grace.
				env.AdvanceWhen(t, func() bool { return w.creations.stop.Err() != nil }, tt.stepDelay)
			}
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			start := time.Now()
			require.NoError(t, w.Close(ctx))
			took := time.Since(start)
			assert.Less(t, took, bound+250*time.Millisecond, "Close outlived its bound")

			var got outcome
			select {
			case got = <-done:
			case <-time.After(time.Second):
				t.Fatal("the call had not returned a second after Close")
			}
			if tt.method == protocol.MethodEnvironmentProbe {
				require.NoError(t, got.err)
				assert.False(t, got.res.(protocol.ProbeResult).OK)
			} else {
				// The envelope carries the message only.
				require.Error(t, got.err)
				assert.Contains(t, got.err.Error(), errShuttingDown.Error())
			}
			if tt.stuck {
				var envelope *protocol.CreationCleanupError
				require.True(t, errors.As(got.err, &envelope), "no creation-cleanup envelope: %v", got.err)
				sbx := env.Server.Sandboxes()
				require.Len(t, sbx, 1)
				assert.Equal(t, sbx[0].ID, envelope.Cleanup.ProviderLeaseID)
				// What a later destroy finds it by.
				assert.Equal(t, createNamePrefix+envelope.Cleanup.AttemptID, sbx[0].Name)
				assert.Equal(t, envelope.Cleanup.AttemptID, sbx[0].Labels[labelCreateAttempt])
				return
			}
			// The delete was accepted before Close returned: the sandbox is
			// destroying, then gone.
			for _, s := range env.Server.Sandboxes() {
				assert.Equal(t, "destroyed", s.DesiredState, "sandbox %s (%s) left behind", s.ID, s.State)
			}
			env.Server.AdvanceClock(tt.stepDelay)
			assert.Eventually(t, func() bool { return len(env.Server.Sandboxes()) == 0 }, 10*time.Second, 10*time.Millisecond)
		})
	}
}

// A creation that starts after Close began is refused: nothing could clean
// up what it would create.
func TestNoCreationAfterClose(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	require.NoError(t, w.Close(t.Context()))
	params := fmt.Sprintf(`{"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","config":{"apiKey":%q,"apiUrl":%q}}`, env.APIKey, env.APIURL)
	_, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentAcquireLease, params))
	assert.ErrorIs(t, err, errShuttingDown)
	assert.Zero(t, env.Server.Requests()["POST /api/sandbox"])
}

// A clean shutdown logs nothing above info, even when the shutdown's context
// has ended by the time Close runs (the host's input closed right after it):
// with nothing open, nothing is still closing.
func TestCloseOfAnIdleWorkerWarnsOfNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 50 {
		var logs bytes.Buffer
		w := New(discardHost{}, Options{Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
		require.NoError(t, w.Close(ctx))
		require.Empty(t, logs.String())
	}
}
