package daytona

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"time"
)

// readAheadSize is how much one read of a Daytona connection may take.
const readAheadSize = 64 << 10

// maxIdleConnsPerHost keeps connections for concurrent commands: the
// transport's default of two would close (and later re-dial, with a TLS
// handshake) every connection beyond the second when many commands run at
// once against the same API host.
const maxIdleConnsPerHost = 64

// NewHTTPClient returns the HTTP client New uses when Config.HTTPClient is
// nil: a clone of http.DefaultTransport that keeps up to 64 idle connections
// per host and whose connections read ahead.
//
// Session logs arrive as many small WebSocket frames (the daemon sends 1 KiB
// at a time) and the WebSocket library reads its connection through a 4 KiB
// buffer, which costs a system call per 4 KiB of output. Reading ahead in
// 64 KiB pieces takes whatever has arrived in one call instead.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &readAheadConn{Conn: conn, r: bufio.NewReaderSize(conn, readAheadSize)}, nil
	}
	return &http.Client{Transport: t}
}

// readAheadConn is a connection read through a large buffer.
type readAheadConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readAheadConn) Read(p []byte) (int, error) { return c.r.Read(p) }
