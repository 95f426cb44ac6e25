package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
)

// A sandbox that starts just as an acquire's budget runs out is seen by the
// wait's final refresh, which runs past the budget's context: under it, the
// refresh was cancelled and the acquire failed as timed out.
func TestWaitStartedWithinSeesAStartAtTheBudgetsEnd(t *testing.T) {
	t.Parallel()
	budget := 300 * time.Millisecond
	bctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	deadline, _ := bctx.Deadline()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		state := "starting"
		if !time.Now().Before(deadline) {
			state = "started"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "sb", "state": state})
	}))
	defer srv.Close()
	client, err := daytona.New(daytona.Config{APIKey: "k", APIURL: srv.URL + "/api"})
	require.NoError(t, err)

	sbx, err := waitStartedWithin(t.Context(), bctx, client, "sb")
	require.NoError(t, err)
	require.Equal(t, daytona.StateStarted, sbx.State)
}

// Cancelling the budget (a shutdown cancels a creation's) still ends the
// wait at once: only the budget's deadline is stretched.
func TestWaitStartedWithinEndsWhenTheBudgetIsCancelled(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "sb", "state": "starting"})
	}))
	defer srv.Close()
	client, err := daytona.New(daytona.Config{APIKey: "k", APIURL: srv.URL + "/api"})
	require.NoError(t, err)
	bctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	stop := errors.New("shutting down")
	bctx, cancelCause := context.WithCancelCause(bctx)
	defer cancel()
	time.AfterFunc(200*time.Millisecond, func() { cancelCause(stop) })

	_, err = waitStartedWithin(t.Context(), bctx, client, "sb")
	require.Error(t, err)
}
