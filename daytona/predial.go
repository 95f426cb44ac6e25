package daytona

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// A PreparedStream is a connection to a sandbox's toolbox host opened ahead
// of a log stream, so that its TCP and TLS handshakes overlap the request
// that dispatches the command instead of following it.
//
// Each log WebSocket needs a connection of its own: an upgraded connection
// never returns to the pool, and requests that HTTP/2 multiplexes cannot be
// upgraded at all. Dialed only once the command has been dispatched, that
// connection adds one to three round trips to every command, most of a
// short command's latency against a remote Daytona.
//
// Pass it to FollowSessionCommandLogs in FollowOptions.Prepared (or to
// ConnectPty in PtyConnectOptions.Prepared, opened while the PTY is created)
// and Close it when done; a nil *PreparedStream is valid and means "dial as
// usual".
type PreparedStream struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the dial has ended

	mu    sync.Mutex
	conn  net.Conn // nil once taken or closed
	taken bool
}

// PrepareLogStream starts opening a connection for the next log stream (or
// PTY connection) of this toolbox. It returns nil when the connection
// cannot be prepared here (a client whose transport is not an
// *http.Transport): the stream then dials as usual, as it does when the
// preparation fails or a proxy stands between us and the toolbox host. ctx bounds the dial; Close the result to
// stop it and release an unused connection.
func (t *Toolbox) PrepareLogStream(ctx context.Context) *PreparedStream {
	d := t.c.streams
	if d == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &PreparedStream{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		// A failed dial leaves nothing to take; the stream then dials as
		// usual and reports its own error.
		conn, err := t.dialForStream(ctx, d)
		if err != nil {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.taken || ctx.Err() != nil {
			// Closed while dialing.
			_ = conn.Close()
			return
		}
		p.conn = conn
	}()
	return p
}

// streamDialer opens connections the way the client's transport would for
// an HTTP/1.1 request, from settings copied when the client was built: the
// transport completes its own TLS settings on first use, so they cannot be
// read while requests run.
type streamDialer struct {
	dial             func(ctx context.Context, network, addr string) (net.Conn, error)
	proxy            func(*http.Request) (*url.URL, error)
	tls              *tls.Config // never nil
	handshakeTimeout time.Duration
}

// newStreamDialer copies hc's transport settings, or returns nil when its
// transport is not an *http.Transport.
func newStreamDialer(hc *http.Client) *streamDialer {
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, ok := rt.(*http.Transport)
	//lint:ignore SA1019 a caller's transport may still set the deprecated dial hooks; then we must not dial past them.
	if !ok || tr.DialTLSContext != nil || tr.DialTLS != nil || (tr.DialContext == nil && tr.Dial != nil) {
		// Not a transport whose dialing we can repeat.
		return nil
	}
	// Clone settles the transport's lazy defaults before copying them, so it
	// is safe even against a transport already in use.
	cp := tr.Clone()
	d := &streamDialer{dial: cp.DialContext, proxy: cp.Proxy, tls: cp.TLSClientConfig, handshakeTimeout: cp.TLSHandshakeTimeout}
	if d.dial == nil {
		var nd net.Dialer
		d.dial = nd.DialContext
	}
	if d.tls == nil {
		d.tls = &tls.Config{}
	}
	return d
}

// dialForStream opens a connection to the toolbox host: the transport's
// dialer, then TLS offering only http/1.1 (a WebSocket upgrade needs it).
func (t *Toolbox) dialForStream(ctx context.Context, d *streamDialer) (net.Conn, error) {
	// Only a toolbox URL already known: resolving it here would ask the
	// control plane a second time, beside the dispatch that is resolving it.
	t.mu.Lock()
	u := t.base
	t.mu.Unlock()
	if u == nil {
		return nil, errors.New("daytona: toolbox URL not resolved yet")
	}
	if d.proxy != nil {
		proxy, err := d.proxy(&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}})
		if err != nil || proxy != nil {
			// The transport goes through the proxy; so does the stream.
			return nil, errors.New("daytona: toolbox reached through a proxy")
		}
	}
	// The dial takes a slot to the host like a request: a burst of commands
	// opens its streams' connections in turn, as it dispatches them.
	release, err := t.c.queue.acquire(ctx, hostKey(u))
	if err != nil {
		return nil, err
	}
	defer release()
	addr := hostPort(u)
	conn, err := d.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" {
		return conn, nil
	}
	cfg := d.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	cfg.NextProtos = []string{"http/1.1"}
	hctx := ctx
	if d.handshakeTimeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, d.handshakeTimeout)
		defer cancel()
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// hostPort is u's host with the scheme's default port when it names none.
func hostPort(u *url.URL) string {
	if port := u.Port(); port != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// take waits for the dial and hands over its connection, once. It returns
// nil when there is none to take (already taken, failed, or not prepared).
func (p *PreparedStream) take(ctx context.Context) net.Conn {
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.taken = true
	conn := p.conn
	p.conn = nil
	return conn
}

// Close stops a dial still running and closes a connection nobody took. It
// returns once the dialing goroutine has ended.
func (p *PreparedStream) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.taken = true
	conn := p.conn
	p.conn = nil
	p.mu.Unlock()
	p.cancel()
	<-p.done
	if conn != nil {
		_ = conn.Close()
	}
}

// preparedClient is an HTTP client that sends its one request over conn:
// the WebSocket handshake on a prepared connection.
func preparedClient(conn net.Conn) *http.Client {
	return &http.Client{Transport: &handshakeTransport{conn: conn}}
}

// handshakeBufferSize holds a handshake's response headers; frames that
// arrive with them stay in it until the WebSocket reads them.
const handshakeBufferSize = 4 << 10

// handshakeTransport sends one request over a prepared connection and reads
// its response, as an http.Transport would for a WebSocket handshake, but
// without a transport's pool, its two goroutines and its buffers for a
// connection that is only ever used once. A 101 response's body is the
// connection itself (the WebSocket library takes it over); any other
// response closes the connection once its body is closed.
type handshakeTransport struct {
	mu   sync.Mutex
	conn net.Conn // nil once used
	// open is the connection while its handshake is refused but its body
	// not yet closed; CloseIdleConnections closes it.
	open net.Conn
}

func (t *handshakeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	conn := t.conn
	t.conn = nil
	t.mu.Unlock()
	if conn == nil {
		return nil, errors.New("daytona: prepared connection already used")
	}
	// The request's context bounds the handshake, as in a transport.
	cancelled := make(chan struct{})
	stop := context.AfterFunc(req.Context(), func() {
		close(cancelled)
		_ = conn.Close()
	})
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = conn.Close()
		select {
		case <-cancelled:
			return nil, req.Context().Err()
		default:
			return nil, err
		}
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(conn, handshakeBufferSize)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	if !stop() {
		_ = resp.Body.Close()
		return fail(req.Context().Err())
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &upgradedConn{Reader: br, conn: conn}
		return resp, nil
	}
	t.mu.Lock()
	t.open = conn
	t.mu.Unlock()
	resp.Body = &connClosingBody{ReadCloser: resp.Body, conn: conn}
	return resp, nil
}

// CloseIdleConnections closes the connection of a refused handshake.
func (t *handshakeTransport) CloseIdleConnections() {
	t.mu.Lock()
	conn := t.open
	t.open = nil
	t.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// upgradedConn is the connection after a 101, read through the buffer the
// response was read with.
type upgradedConn struct {
	*bufio.Reader
	conn net.Conn
}

func (u *upgradedConn) Write(p []byte) (int, error) { return u.conn.Write(p) }
func (u *upgradedConn) Close() error                { return u.conn.Close() }

// connClosingBody closes the connection with the body of a refused
// handshake.
type connClosingBody struct {
	io.ReadCloser
	conn net.Conn
}

func (b *connClosingBody) Close() error {
	err := b.ReadCloser.Close()
	_ = b.conn.Close()
	return err
}
