package daytona

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// readAheadSize is how much one read of a Daytona connection may take.
const readAheadSize = 64 << 10

// DefaultMaxRequestsPerHost is how many requests the clients sharing a
// RequestQueue have in flight to one Daytona host when the queue is built
// with a bound of zero. It is also how many idle connections the default
// HTTP client keeps per host, so that a full set of requests finds its
// connections open.
const DefaultMaxRequestsPerHost = 32

// NewHTTPClient returns the HTTP client New uses when Config.HTTPClient is
// nil: a clone of http.DefaultTransport that keeps DefaultMaxRequestsPerHost
// idle connections per host (the transport's default of two would close,
// and later re-dial with a TLS handshake, every connection beyond the second
// when many commands run at once) and whose connections read ahead.
//
// Session logs arrive as many small WebSocket frames (the daemon sends 1 KiB
// at a time) and the WebSocket library reads its connection through a 4 KiB
// buffer, which costs a system call per 4 KiB of output. Reading ahead in
// 64 KiB pieces takes whatever has arrived in one call instead. The
// read-ahead buffer is held only while it has unread bytes (see
// readAheadConn), so the many connections of concurrent commands that wait
// for output cost no buffer at all.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = DefaultMaxRequestsPerHost
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	buffers := newBufferPool()
	closer := newLateCloser(lateCloseDelay, lateCloseMax)
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// The dial's connect(2) has woken the runtime's monitor: the
		// descriptors parked since the last dial close now at no extra cost.
		closer.flush()
		return newReadAheadConn(conn, buffers, closer), nil
	}
	return withoutRedirects(&http.Client{Transport: t})
}

// bufferPool lends the read-ahead buffers of a client's connections.
type bufferPool interface {
	get() *[readAheadSize]byte
	put(*[readAheadSize]byte)
}

// syncBufferPool is a bufferPool on a sync.Pool: buffers nobody borrows are
// left to the garbage collector.
type syncBufferPool struct{ p sync.Pool }

func newBufferPool() *syncBufferPool {
	return &syncBufferPool{p: sync.Pool{New: func() any { return new([readAheadSize]byte) }}}
}

func (s *syncBufferPool) get() *[readAheadSize]byte  { return s.p.Get().(*[readAheadSize]byte) }
func (s *syncBufferPool) put(b *[readAheadSize]byte) { s.p.Put(b) }
