package rpc

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// goroutineID is the number runtime.Stack prints for the calling goroutine.
func goroutineID(t *testing.T) int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf) // "goroutine", N, "[running]:", …
	require.GreaterOrEqual(t, len(f), 2)
	id, err := strconv.Atoi(string(f[1]))
	require.NoError(t, err)
	return id
}

func TestAServingGoroutineTakesTheNextRequest(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ids := map[string]int{}
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		mu.Lock()
		ids[string(req.Params)] = goroutineID(t)
		mu.Unlock()
		return nil, nil
	})
	f := startConn(t, h, Options{})
	f.send(`{"jsonrpc":"2.0","id":1,"method":"m","params":1}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":null}`, f.recvRaw())
	testutil.WaitFor(t, "the goroutine that served the first request waits for another", func() bool { return f.conn.waiting.Load() == 1 })
	f.send(`{"jsonrpc":"2.0","id":2,"method":"m","params":2}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":null}`, f.recvRaw())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, ids["1"], ids["2"], "the second request was served by a new goroutine")
}

func TestFewServingGoroutinesWaitAndAllEndWithServe(t *testing.T) {
	t.Parallel()
	const n = 3 * maxWaitingServers
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		started.Done()
		<-release
		return req.Params, nil
	})
	f := startConn(t, h, Options{})
	for i := range n {
		f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"m","params":%d}`, i, i))
	}
	// All n run at once: none waits behind another.
	started.Wait()
	close(release)
	for range n {
		f.recv()
	}
	testutil.WaitFor(t, "the goroutines past the bound end", func() bool { return f.conn.waiting.Load() == maxWaitingServers })
	f.toConn.Close()
	require.NoError(t, func() error {
		select {
		case err := <-f.served:
			f.served <- err
			return nil
		case <-time.After(lineWait):
			return fmt.Errorf("Serve did not return")
		}
	}())
	testutil.WaitFor(t, "the waiting goroutines end once Serve returns", func() bool { return f.conn.waiting.Load() == 0 })
}
