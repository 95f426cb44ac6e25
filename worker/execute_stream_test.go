package worker

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
)

// TestExecuteOpensTheLogStreamConnectionDuringDispatch checks that a
// session command's log stream does not wait for a connection of its own
// after the dispatch: the emulator holds the dispatch until a connection
// has been opened, and the warm command then dials nothing else.
func TestExecuteOpensTheLogStreamConnectionDuringDispatch(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	var (
		armed  atomic.Bool
		dials  atomic.Int32
		once   sync.Once
		dialed = make(chan struct{})
	)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if armed.Load() && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/exec") {
			select {
			case <-dialed:
			case <-time.After(10 * time.Second):
				t.Error("no connection was opened while the command was being dispatched")
			}
		}
		env.Server.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	hc := daytona.NewHTTPClient()
	tr := hc.Transport.(*http.Transport)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if armed.Load() {
			dials.Add(1)
			once.Do(func() { close(dialed) })
		}
		return dial(ctx, network, addr)
	}
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), HTTPClient: hc})
	t.Cleanup(func() { _ = w.Close(context.Background()) })

	l := acquireThroughHandler(t, w, env.APIKey, front.URL+"/api")
	ctx := t.Context()
	run := func() {
		res, err := l.execute(ctx, `"command":"echo","args":["hi"]`)
		require.NoError(t, err)
		out, err := json.Marshal(res)
		require.NoError(t, err)
		assert.Contains(t, string(out), `"stdout":"hi\n"`)
	}
	run() // opens the session and warms the connection pool
	armed.Store(true)
	run()
	armed.Store(false)
	assert.EqualValues(t, 1, dials.Load(), "a warm command dials once: the log stream's connection")

	require.NoError(t, l.destroy(ctx))
}
