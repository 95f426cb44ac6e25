package rpc

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Memory a burst of large results left behind is given back once nothing is
// in flight (the runtime would otherwise keep it until its next forced
// collection, minutes later); small replies and busy periods never trigger it.
func TestMemoryIsReleasedOnceIdleAfterLargeOutput(t *testing.T) {
	t.Parallel()
	released := make(chan struct{}, 10)
	var releases atomic.Int32
	hold := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		switch req.Method {
		case "big":
			return strings.Repeat("x", 4096), nil
		case "hold":
			<-hold
		}
		return nil, nil
	})
	f := startConn(t, h, Options{IdleReleaseBytes: 4000, IdleReleaseDelay: 20 * time.Millisecond,
		IdleRelease: func() { releases.Add(1); released <- struct{}{} }})
	// Waiting for a release may take long on a loaded machine; a release
	// that should not come is looked for over a short while only (one that
	// came late would be seen by the next check).
	waitFor := func(d time.Duration) bool {
		select {
		case <-released:
			return true
		case <-time.After(d):
			return false
		}
	}
	none := func() bool { return waitFor(200 * time.Millisecond) }
	one := func() bool { return waitFor(30 * time.Second) }

	f.send(`{"jsonrpc":"2.0","id":1,"method":"small"}`)
	f.recvRaw()
	assert.False(t, none(), "small replies release nothing")

	// A large result while another request is still in flight: nothing until
	// that one is answered too.
	f.send(`{"jsonrpc":"2.0","id":2,"method":"hold"}`)
	f.send(`{"jsonrpc":"2.0","id":3,"method":"big"}`)
	f.recvRaw()
	assert.False(t, none(), "released while a request was in flight")
	close(hold)
	f.recvRaw()
	require.True(t, one(), "not released once idle after a large result")
	assert.False(t, none(), "released twice for one burst")

	f.send(`{"jsonrpc":"2.0","id":4,"method":"big"}`)
	f.recvRaw()
	require.True(t, one(), "a later burst is released too")
	assert.EqualValues(t, 2, releases.Load())
}

// Zero settings take the defaults, and the release then frees memory.
func TestIdleReleaseDefaults(t *testing.T) {
	r := newIdleRelease(0, 0, nil)
	assert.Equal(t, int64(defaultIdleReleaseBytes), r.threshold)
	assert.Equal(t, defaultIdleReleaseDelay, r.delay)
	require.NotNil(t, r.release)
	r.release()
}
