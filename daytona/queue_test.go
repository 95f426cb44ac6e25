package daytona

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequestQueueServesOldestWorkFirst(t *testing.T) {
	t.Parallel()
	q := NewRequestQueue(1)
	const host = "http://daytona.test"
	hold, err := q.acquire(context.Background(), host)
	require.NoError(t, err)

	// Waiters arrive one by one, their work begun in a shuffled order; two
	// pairs of them began at the same moment.
	base := time.Now()
	starts := []int{5, 1, 4, 1, 0, 3, 5, 2}
	var mu sync.Mutex
	var order []int // index into starts, in the order the slot was granted
	var done sync.WaitGroup
	for i, s := range starts {
		ctx := WithWorkStart(context.Background(), base.Add(time.Duration(s)*time.Millisecond))
		done.Go(func() {
			release, err := q.acquire(ctx, host)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			release()
		})
		require.True(t, pollUntil(10*time.Second, func() bool { return q.queued(host) == i+1 }))
	}
	hold()
	done.Wait()
	// Oldest work first; equal starts in the order they asked.
	assert.Equal(t, []int{4, 1, 3, 7, 5, 2, 0, 6}, order)
	assert.Empty(t, q.hosts, "an idle host keeps no entry")
}

func TestRequestQueueWaiterThatGivesUpLeavesNoTrace(t *testing.T) {
	t.Parallel()
	q := NewRequestQueue(1)
	const host = "http://daytona.test"
	hold, err := q.acquire(context.Background(), host)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := q.acquire(ctx, host)
		errc <- err
	}()
	require.True(t, pollUntil(10*time.Second, func() bool { return q.queued(host) == 1 }))
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	assert.Zero(t, q.queued(host))
	hold()
	hold() // a second call is harmless
	release, err := q.acquire(context.Background(), host)
	require.NoError(t, err, "the slot is free again")
	release()
	assert.Empty(t, q.hosts)
}

func TestRequestQueueBoundsEachHostApart(t *testing.T) {
	t.Parallel()
	q := NewRequestQueue(2)
	var releases []func()
	for _, host := range []string{"http://a.test", "http://a.test", "http://b.test", "http://b.test", "https://a.test"} {
		r, err := q.acquire(context.Background(), host)
		require.NoError(t, err)
		releases = append(releases, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := q.acquire(ctx, "http://a.test")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a third request to a host waits")
	for _, r := range releases {
		r()
	}
	assert.Empty(t, q.hosts)
}

// TestClientBoundsRequestsPerHostAndReusesConnections: many concurrent calls
// through a client whose queue allows three reach the server three at a
// time, over three connections.
func TestClientBoundsRequestsPerHostAndReusesConnections(t *testing.T) {
	t.Parallel()
	const limit, calls = 3, 20
	var inflight, most, conns atomic.Int32
	proceed := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-proceed
		inflight.Add(-1)
		writeJSON(w, http.StatusOK, map[string]string{"dir": r.URL.Query().Get("n")})
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	q := NewRequestQueue(limit)
	c, err := New(Config{APIKey: testKey, APIURL: srv.URL + "/api", Queue: q})
	require.NoError(t, err)
	tb := c.ToolboxFor("sb-1", srv.URL+"/toolbox")

	var done sync.WaitGroup
	for range calls {
		done.Go(func() {
			_, err := tb.WorkDir(context.Background())
			assert.NoError(t, err)
		})
	}
	host := hostKey(mustParse(t, srv.URL))
	require.True(t, pollUntil(10*time.Second, func() bool {
		return inflight.Load() == limit && q.queued(host) == calls-limit
	}), "three requests reach the server and the others wait")
	close(proceed)
	done.Wait()
	assert.EqualValues(t, limit, most.Load(), "never more than the bound in flight")
	assert.LessOrEqual(t, conns.Load(), int32(limit), "connections are reused")
	assert.Zero(t, q.queued(host))
}

// A request answered only when its command ends (a synchronous execute or
// session exec) takes no slot of the host's queue: with every slot of a
// one-slot queue otherwise free, a short request of another sandbox behind
// the same proxy host goes through while the command still runs.
func TestRunningCommandHoldsNoQueueSlot(t *testing.T) {
	t.Parallel()
	for name, run := range map[string]func(tb *Toolbox) error{
		"execute": func(tb *Toolbox) error {
			_, err := tb.Execute(context.Background(), ExecuteRequest{Command: "sleep 3600"})
			return err
		},
		"synchronous session exec": func(tb *Toolbox) error {
			_, err := tb.SessionExec(context.Background(), "s", SessionExecRequest{Command: "sleep 3600"})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			arrived, release := make(chan struct{}), make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/toolbox/sb-1/") {
					close(arrived)
					<-release // the command runs
					writeJSON(w, 200, map[string]any{"exitCode": 0, "result": "", "cmdId": "c"})
					return
				}
				writeJSON(w, 200, map[string]any{"dir": "/home"})
			}))
			defer srv.Close()
			c, err := New(Config{APIKey: testKey, APIURL: srv.URL + "/api", Queue: NewRequestQueue(1)})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- run(c.ToolboxFor("sb-1", srv.URL+"/toolbox")) }()
			<-arrived
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = c.ToolboxFor("sb-2", srv.URL+"/toolbox").WorkDir(ctx)
			close(release)
			if err != nil {
				t.Errorf("a short request behind a running command: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("the command: %v", err)
			}
		})
	}
}
