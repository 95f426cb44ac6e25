package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/protocol"
)

// An acquisition that could not delete the sandbox it created hands the
// host a creation-cleanup record; the host's destroy with that record
// deletes the sandbox, and only a sandbox that carries the attempt's labels,
// in the account it was created in.
func TestDestroyWithAFailedCreateCleanupRecord(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	base := fmt.Sprintf(`"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000}`, env.APIKey, env.APIURL)

	// The workspace lookups fail after the create, and Daytona refuses the
	// delete that follows.
	env.Server.AddFault(emulator.Fault{Path: `/work-dir$|/user-home-dir$`, Status: 500})
	noDelete := env.Server.AddFault(emulator.Fault{Method: "DELETE", Path: `^/api/sandbox/`, Status: 403})
	_, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentAcquireLease, `{`+base+`,"runId":"r"}`))
	var envelope *protocol.CreationCleanupError
	require.True(t, errors.As(err, &envelope), "no creation-cleanup record: %v", err)
	record := envelope.Cleanup
	require.Len(t, env.Server.Sandboxes(), 1)
	id := env.Server.Sandboxes()[0].ID
	require.Equal(t, id, record.ProviderLeaseID)

	destroy := func(c protocol.CreationCleanup) (string, error) {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		res, err := w.Handle(t.Context(), requestOf(protocol.MethodEnvironmentDestroyLease,
			`{`+base+`,"providerLeaseId":"`+id+`","leaseMetadata":{"failedCreateCleanup":`+string(b)+`}}`))
		if err != nil {
			return "", err
		}
		out, err := json.Marshal(res)
		require.NoError(t, err)
		return string(out), nil
	}
	destroyed := `{"providerLeaseId":"` + id + `","state":"destroyed"}`
	edit := func(f func(c *protocol.CreationCleanup)) protocol.CreationCleanup {
		c := record
		f(&c)
		return c
	}
	tests := []struct {
		name   string
		record protocol.CreationCleanup
		before func()
		want   string // the receipt's JSON
		err    string
		left   bool // the sandbox is still there afterwards
		// observed: the error hands back the record with the sandbox's id
		// as observed, which the host journals before it retries.
		observed bool
	}{
		{name: "a record without its attempt", record: edit(func(c *protocol.CreationCleanup) { c.AttemptID = "" }),
			err: "Daytona failed-create cleanup: the recorded cleanup has no attempt id", left: true},
		{name: "a record of another account", record: edit(func(c *protocol.CreationCleanup) { c.AccountFingerprint = "another" }),
			err: "Daytona failed-create cleanup: the configured account is not the account the sandbox was created in", left: true},
		{name: "a record of another attempt", record: edit(func(c *protocol.CreationCleanup) { c.AttemptID = "other-attempt" }),
			err: "Daytona failed-create cleanup: sandbox " + id + " does not carry the labels of attempt other-attempt; refusing to delete it", left: true},
		{name: "a record of another environment", record: edit(func(c *protocol.CreationCleanup) { c.EnvironmentID = "e-2" }),
			err: "Daytona failed-create cleanup: sandbox " + id + " does not carry the labels of attempt " + record.AttemptID + "; refusing to delete it", left: true},
		{name: "Daytona still refuses the delete", record: record,
			err: "Daytona failed-create cleanup could not delete sandbox " + id + ": ", left: true, observed: true},
		{name: "the record", record: record, before: noDelete, want: destroyed},
		{name: "the record again, once the sandbox is gone", record: record, want: destroyed},
	}
	for _, tt := range tests {
		if tt.before != nil {
			tt.before()
		}
		got, err := destroy(tt.record)
		if tt.err != "" {
			require.Error(t, err, tt.name)
			assert.Contains(t, err.Error(), tt.err, tt.name)
		} else {
			require.NoError(t, err, tt.name)
			assert.JSONEq(t, tt.want, got, tt.name)
		}
		_, ok := env.Server.Sandbox(id)
		assert.Equal(t, tt.left, ok, "%s: sandbox left", tt.name)
		var again *protocol.CreationCleanupError
		if assert.Equal(t, tt.observed, errors.As(err, &again), "%s: a creation-cleanup record: %v", tt.name, err) && tt.observed {
			assert.Equal(t, id, again.Cleanup.ObservedProviderLeaseID)
			assert.Equal(t, record.AttemptID, again.Cleanup.AttemptID)
		}
	}
}
