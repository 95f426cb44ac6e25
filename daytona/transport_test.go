package daytona

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHTTPClientKeepsConnectionsOfConcurrentRequests(t *testing.T) {
	t.Parallel()
	var dials atomic.Int32
	const concurrent = 20
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		arrived.Wait() // all requests in flight at once, each on its own connection
		_, _ = io.WriteString(w, strings.Repeat("x", 100_000))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := NewHTTPClient()
	round := func() {
		arrived.Add(concurrent)
		var done sync.WaitGroup
		for range concurrent {
			done.Go(func() {
				resp, err := client.Get(srv.URL)
				if !assert.NoError(t, err) {
					arrived.Done()
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.NoError(t, err)
				assert.Len(t, body, 100_000)
			})
		}
		done.Wait()
	}
	round()
	require.EqualValues(t, concurrent, dials.Load())
	round()
	assert.EqualValues(t, concurrent, dials.Load(), "the second round reuses the first round's connections")
}
