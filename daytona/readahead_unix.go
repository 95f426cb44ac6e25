//go:build unix

package daytona

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/paperclipai/daytona-worker/internal/rawio"
)

// readAheadConn reads a connection through a buffer of readAheadSize bytes
// that it borrows from a pool for as long as the buffer holds unread bytes,
// and only then.
//
// A bufio.Reader would do the read-ahead too, but it keeps its buffer for
// the connection's life and fills it with a blocking read: every connection
// waiting on a quiet command (a log stream, an idle keep-alive connection)
// would hold 64 KiB for nothing, about 200 KiB per in-flight command once
// the request connections are counted. Here the wait for data happens
// without a buffer (the runtime's poller waits for the socket to become
// readable), the buffer is borrowed for the read itself, and it goes back
// as soon as the caller has taken everything it holds: the memory is that of
// the bytes in flight, not of the connections open.
type readAheadConn struct {
	net.Conn
	raw    syscall.RawConn
	pool   bufferPool
	closer *lateCloser // nil: Close closes at once
	closed atomic.Bool

	buf        *[readAheadSize]byte // borrowed; nil when nothing is buffered
	start, end int
}

// newReadAheadConn wraps conn; a connection without a file descriptor (not
// a TCP or Unix socket) is returned as it is. closer, when not nil, closes
// its descriptor after Close (see lateCloser).
func newReadAheadConn(conn net.Conn, pool bufferPool, closer *lateCloser) net.Conn {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	return &readAheadConn{Conn: conn, raw: raw, pool: pool, closer: closer}
}

func (c *readAheadConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.closed.Load() {
		return 0, c.opError("read", net.ErrClosed)
	}
	if c.buf == nil {
		if len(p) >= readAheadSize {
			// The caller's buffer is as large as ours: no copy.
			n, err := c.Conn.Read(p)
			if err != nil && c.closed.Load() {
				return 0, c.opError("read", net.ErrClosed)
			}
			return n, err
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.start:c.end])
	c.start += n
	if c.start == c.end {
		c.pool.put(c.buf)
		c.buf = nil
	}
	return n, nil
}

// fill waits until the socket is readable, then reads what it holds (up to
// readAheadSize bytes) into a borrowed buffer.
func (c *readAheadConn) fill() error {
	var (
		n     int
		errno syscall.Errno
	)
	err := c.raw.Read(func(fd uintptr) bool {
		buf := c.pool.get()
		n, errno = rawio.ReadFD(fd, buf[:])
		if errno == syscall.EAGAIN {
			// Nothing yet: give the buffer back while the poller waits.
			c.pool.put(buf)
			return false
		}
		if errno != 0 || n <= 0 {
			c.pool.put(buf)
		} else {
			c.buf, c.start, c.end = buf, 0, n
		}
		return true
	})
	switch {
	case c.closed.Load():
		// Shut down by Close while waiting: what a closed net.Conn reports.
		if c.buf != nil {
			c.pool.put(c.buf)
			c.buf = nil
		}
		return c.opError("read", net.ErrClosed)
	case err != nil:
		return c.opError("read", err)
	case errno != 0:
		return c.opError("read", errno)
	case n <= 0:
		return io.EOF
	}
	return nil
}

// Write writes all of p as net.Conn.Write does, with the system calls the
// scheduler is not told about (see package rawio): a loopback write, or one
// into a full socket buffer's worth of room, takes long enough for the
// runtime's monitor to hand the worker's processor to another thread.
func (c *readAheadConn) Write(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.opError("write", net.ErrClosed)
	}
	n, err := rawio.Write(c.raw, p)
	if err != nil {
		if c.closed.Load() {
			err = net.ErrClosed
		}
		return n, c.opError("write", err)
	}
	return n, nil
}

// Close ends the connection as net.Conn.Close does: the peer sees its end at
// once, and a Read or Write waiting on it, or made after, fails with
// net.ErrClosed. With a lateCloser the descriptor itself is closed later (see
// lateCloser): the connection is shut down in both directions here, with a
// system call the scheduler is not told about, which wakes the waiting Read
// or Write as closing would.
func (c *readAheadConn) Close() error {
	if c.closer == nil {
		return c.Conn.Close()
	}
	if !c.closed.CompareAndSwap(false, true) {
		return c.opError("close", net.ErrClosed)
	}
	err := c.raw.Control(func(fd uintptr) { rawio.Shutdown(fd) })
	if err != nil {
		// The descriptor is unusable already: nothing to wait for.
		return c.Conn.Close()
	}
	c.closer.park(c.Conn)
	return nil
}

// opError reports an error of op on the raw connection as net.Conn does: the
// poller's (closed, past a deadline) unwrapped from its net.OpError, a system
// call's as an os.SyscallError, inside a net.OpError naming both ends.
func (c *readAheadConn) opError(op string, err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		err = opErr.Err
	} else if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError(op, errno)
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
