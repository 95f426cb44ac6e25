package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/protocol"
)

// capture captures the lease's sandbox as a template named label.
func (l *handlerLease) capture(ctx context.Context, label string, timeoutMs int) (any, error) {
	return l.w.Handle(ctx, requestOf(protocol.MethodEnvironmentCaptureTemplate,
		fmt.Sprintf(`{%s,"providerLeaseId":%q,"templateLabel":%q,"timeoutMs":%d}`, l.base, l.id, label, timeoutMs)))
}

// deleteTemplate deletes the template ref (a snapshot); extra members may follow.
func (l *handlerLease) deleteTemplate(ctx context.Context, ref string, extra string) (any, error) {
	return l.w.Handle(ctx, requestOf(protocol.MethodEnvironmentDeleteTemplate,
		fmt.Sprintf(`{%s,"templateRef":%q%s}`, l.base, ref, extra)))
}

// captureTiming shortens the waits for a snapshot's record and the reaper's
// first look: the emulator records a snapshot as the sandbox leaves
// snapshotting, or never, so a longer wait would only be waited out.
func captureTiming() Timing {
	return Timing{SnapshotRecordGrace: 100 * time.Millisecond, ReaperFirstCheck: 10 * time.Millisecond}
}

// A capture answers with a snapshot that exists and is active, and one that
// fails leaves no snapshot of its own behind, while a snapshot of the same
// name that existed before it is never touched.
func TestCaptureTemplateKeepsOnlyWhatItRecorded(t *testing.T) {
	t.Parallel()
	const taken = "name-taken"
	tests := []struct {
		name    string
		label   string // default: the name, sanitised
		prepare func(t *testing.T, env *emulatortest.Env, l *handlerLease)
		err     string // ${ID} is the sandbox id; "" for success
		// exists: a snapshot of the label exists afterwards; for a taken
		// name, the one that existed before.
		exists bool
	}{
		{name: "recorded and active", exists: true},
		{name: "sandbox errors while snapshotting",
			prepare: func(t *testing.T, env *emulatortest.Env, l *handlerLease) {
				env.Server.AddSnapshotFault(emulator.SnapshotFault{Outcome: emulator.SnapshotSandboxErrors, Reason: "disk quota exceeded"})
			},
			err: "Sandbox ${ID} snapshot failed with state: error, error reason: disk quota exceeded"},
		{name: "job fails silently",
			prepare: func(t *testing.T, env *emulatortest.Env, l *handlerLease) {
				env.Server.AddSnapshotFault(emulator.SnapshotFault{Outcome: emulator.SnapshotJobFails})
			},
			err: "Daytona finished snapshotting sandbox ${ID} but recorded no snapshot named job-fails-silently: the snapshot job failed"},
		{name: "archived sandbox",
			prepare: func(t *testing.T, env *emulatortest.Env, l *handlerLease) {
				c := emulatorClient(t, env)
				_, err := c.StopAndWait(t.Context(), l.id, nil, 30*time.Second)
				require.NoError(t, err)
				_, err = c.Archive(t.Context(), l.id)
				require.NoError(t, err)
				_, err = c.WaitForState(t.Context(), l.id, 30*time.Second, daytona.StateArchived)
				require.NoError(t, err)
			},
			err: "Sandbox must be in started or stopped state to create a snapshot"},
		{name: "a taken name, then a capture that fails", label: taken,
			prepare: func(t *testing.T, env *emulatortest.Env, l *handlerLease) {
				_, err := l.capture(t.Context(), taken, 60000)
				require.NoError(t, err)
				env.Server.AddSnapshotFault(emulator.SnapshotFault{Outcome: emulator.SnapshotSandboxErrors, Reason: "no space"})
			},
			err:    "Sandbox ${ID} snapshot failed with state: error, error reason: no space",
			exists: true},
		{name: "a taken name, then a capture that succeeds", label: taken,
			prepare: func(t *testing.T, env *emulatortest.Env, l *handlerLease) {
				_, err := l.capture(t.Context(), taken, 60000)
				require.NoError(t, err)
			},
			exists: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env, w, l := leaseOnEmulatorTiming(t, emulator.Options{}, captureTiming())
			label := tt.label
			if label == "" {
				label = sanitizeSnapshotName(&tt.name, "")
			}
			if tt.prepare != nil {
				tt.prepare(t, env, l)
			}
			c := emulatorClient(t, env)
			before, _ := c.GetSnapshot(t.Context(), label)

			res, err := l.capture(t.Context(), label, 60000)

			after, _ := c.GetSnapshot(t.Context(), label)
			if tt.exists {
				require.NotNil(t, after, "no snapshot %s (have %v)", label, env.Server.Snapshots())
				if before != nil {
					assert.Equal(t, before.ID, after.ID, "the snapshot that existed before is the one left")
				}
			} else {
				assert.Nil(t, after, "a snapshot %s was left behind", label)
			}
			w.reapers.mu.Lock()
			assert.Empty(t, w.reapers.byKey, "nothing left to reap: the job has ended")
			w.reapers.mu.Unlock()
			if tt.err != "" {
				assert.EqualError(t, err, strings.ReplaceAll(tt.err, "${ID}", l.id))
				return
			}
			require.NoError(t, err)
			b, err := json.Marshal(res)
			require.NoError(t, err)
			var got struct {
				TemplateKind, TemplateRef string
				Metadata                  map[string]any
			}
			require.NoError(t, json.Unmarshal(b, &got))
			assert.Equal(t, protocol.TemplateKindSnapshot, got.TemplateKind)
			assert.Equal(t, label, got.TemplateRef)
			assert.Equal(t, l.id, got.Metadata["sandboxId"])
			assert.EqualValues(t, 60000, got.Metadata["timeoutMs"])
			assert.Equal(t, "active", string(after.State))
		})
	}
}

// A capture that gives up while Daytona is still snapshotting answers the
// SDK's timeout; until that job ends a retry of the name is refused (the
// job's snapshot would otherwise be taken for the retry's); once it ends,
// the worker deletes the snapshot it recorded, and a retry captures afresh.
func TestCaptureThatTimesOutIsCleanedUpWhenTheJobEnds(t *testing.T) {
	t.Parallel()
	env, _, l := leaseOnEmulatorTiming(t, emulator.Options{}, captureTiming())
	release := make(chan struct{})
	env.Server.AddSnapshotFault(emulator.SnapshotFault{Times: 1, Until: release})
	_, err := l.capture(t.Context(), "slow", 1000)
	require.EqualError(t, err, msgSnapshotTimeout)
	v, _ := env.Server.Sandbox(l.id)
	assert.Equal(t, "snapshotting", v.State, "Daytona is still at it")

	_, err = l.capture(t.Context(), "slow", 60000)
	assert.EqualError(t, err, "An earlier capture of Daytona snapshot slow is still running; retry once it has finished.")

	close(release)
	testutil.WaitFor(t, "the late snapshot recorded and deleted", func() bool {
		return env.Server.Requests()["DELETE /api/snapshots/{id}"] > 0 && !slices.Contains(env.Server.Snapshots(), "slow")
	})
	res, err := l.capture(t.Context(), "slow", 60000)
	require.NoError(t, err)
	assert.Equal(t, "slow", res.(protocol.CaptureTemplateResult).TemplateRef)
	assert.Contains(t, env.Server.Snapshots(), "slow")
}

// deleteTemplate deletes snapshot templates only, and counts one already
// gone as deleted, so a retried delete succeeds.
func TestDeleteTemplate(t *testing.T) {
	t.Parallel()
	env, _, l := leaseOnEmulator(t, emulator.Options{})
	_, err := l.capture(t.Context(), "to-delete", 60000)
	require.NoError(t, err)
	deleted := protocol.DeleteTemplateResult{Deleted: true, Metadata: deleteMetadata{
		Provider: providerName, TemplateKind: protocol.TemplateKindSnapshot, TemplateRefRedacted: true, Reason: json.RawMessage(`"test"`)}}
	tests := []struct {
		name, ref, extra string
		want             any
		err              string
	}{
		{name: "an image", ref: "ubuntu:24.04", extra: `,"templateKind":"image"`, err: "Daytona can delete snapshot templates only, not image."},
		{name: "no ref", ref: "", err: "Invalid params for environmentDeleteTemplate: params.templateRef must be a non-empty string"},
		{name: "a captured snapshot", ref: "to-delete", extra: `,"templateKind":"snapshot","reason":"test"`, want: deleted},
		{name: "the same again", ref: "to-delete", extra: `,"reason":"test"`, want: deleted},
		{name: "one that never existed", ref: "never-was", extra: `,"reason":"test"`, want: deleted},
		{name: "a general snapshot", ref: "daytona-small", err: "Cannot delete a general snapshot"},
	}
	for _, tt := range tests {
		res, err := l.deleteTemplate(t.Context(), tt.ref, tt.extra)
		if tt.err != "" {
			assert.EqualError(t, err, tt.err, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.want, res, tt.name)
	}
	assert.NotContains(t, env.Server.Snapshots(), "to-delete")
	assert.Contains(t, env.Server.Snapshots(), "daytona-small")
}
