//go:build unix

package daytona

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopbackPair returns both ends of a loopback TCP connection, the client's
// read ahead through pool.
func loopbackPair(t *testing.T, pool bufferPool) (client *readAheadConn, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	c, ok := newReadAheadConn(raw, pool, nil).(*readAheadConn)
	require.True(t, ok, "a TCP connection reads ahead")
	t.Cleanup(func() {
		_ = c.Close()
		_ = server.Close()
	})
	return c, server
}

// countingPool lends buffers and counts what it lends and gets back.
type countingPool struct {
	mu         sync.Mutex
	free       []*[readAheadSize]byte
	gets, puts int
	allocated  int
}

func (p *countingPool) get() *[readAheadSize]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gets++
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	p.allocated++
	return new([readAheadSize]byte)
}

func (p *countingPool) put(b *[readAheadSize]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.puts++
	p.free = append(p.free, b)
}

func (p *countingPool) counts() (gets, puts, allocated int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets, p.puts, p.allocated
}

func TestReadAheadDeliversEveryByteInOrder(t *testing.T) {
	t.Parallel()
	c, server := loopbackPair(t, newBufferPool())
	want := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	go func() {
		// Uneven writes, so reads meet every kind of boundary.
		rest := want
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(100_000))
			if _, err := server.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
		}
		_ = server.Close()
	}()
	var got bytes.Buffer
	sizes := []int{1, 7, 4096, 65535, readAheadSize, 200_000}
	buf := make([]byte, 200_000)
	for i := 0; ; i++ {
		n, err := c.Read(buf[:sizes[i%len(sizes)]])
		got.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	require.Equal(t, len(want), got.Len())
	assert.True(t, bytes.Equal(want, got.Bytes()), "the bytes read are the bytes written")
}

func TestReadAheadHoldsNoBufferWhileWaiting(t *testing.T) {
	t.Parallel()
	pool := &countingPool{}
	c, server := loopbackPair(t, pool)

	// Nothing has arrived: once the read has found the socket empty, it
	// waits with its buffer back in the pool.
	done := make(chan []byte)
	go func() {
		p := make([]byte, 4096)
		n, _ := c.Read(p)
		done <- p[:n]
	}()
	require.True(t, pollUntil(10*time.Second, func() bool {
		gets, puts, _ := pool.counts()
		return gets >= 1 && puts == gets
	}), "a read that finds nothing gives its buffer back while it waits")
	_, err := server.Write([]byte("hello"))
	require.NoError(t, err)
	assert.Equal(t, "hello", string(<-done))
	assert.Nil(t, c.buf, "a drained buffer goes back to the pool")

	// More than the caller takes stays buffered until it is read.
	payload := bytes.Repeat([]byte("x"), 10_000)
	_, err = server.Write(payload)
	require.NoError(t, err)
	var got []byte
	p := make([]byte, 4096)
	for len(got) < len(payload) {
		n, err := c.Read(p)
		require.NoError(t, err)
		got = append(got, p[:n]...)
	}
	assert.Equal(t, payload, got)
	assert.Nil(t, c.buf, "a drained buffer goes back to the pool")
	gets, puts, allocated := pool.counts()
	assert.Equal(t, gets, puts, "every buffer lent came back")
	assert.Equal(t, 1, allocated, "one buffer serves every read of the connection")
}

// pollUntil polls cond until it holds or d has passed.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func TestReadAheadHonoursDeadlinesAndClose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		closer *lateCloser
	}{
		{"closed at once", nil},
		{"closed late", newLateCloser(time.Hour, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, server := loopbackPair(t, newBufferPool())
			c.closer = tc.closer
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
			_, err := c.Read(make([]byte, 16))
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			assert.True(t, ne.Timeout())

			require.NoError(t, c.SetReadDeadline(time.Time{}))
			errc := make(chan error)
			go func() {
				_, err := c.Read(make([]byte, 16))
				errc <- err
			}()
			require.NoError(t, c.Close())
			assert.ErrorIs(t, <-errc, net.ErrClosed, "a waiting read fails as on a closed connection")

			// The peer sees the end at once, however late the descriptor closes
			// (the deadline only bounds a failing test).
			require.NoError(t, server.SetReadDeadline(time.Now().Add(30*time.Second)))
			n, err := server.Read(make([]byte, 16))
			assert.Zero(t, n)
			assert.ErrorIs(t, err, io.EOF)

			for name, err := range map[string]error{
				"read":     func() error { _, err := c.Read(make([]byte, 16)); return err }(),
				"big read": func() error { _, err := c.Read(make([]byte, readAheadSize)); return err }(),
				"write":    func() error { _, err := c.Write([]byte("x")); return err }(),
				"close":    c.Close(),
			} {
				assert.ErrorIs(t, err, net.ErrClosed, "%s after Close", name)
				var opErr *net.OpError
				assert.ErrorAs(t, err, &opErr, "%s after Close", name)
			}
		})
	}
}

func TestReadAheadClosedLateKeepsTheDescriptorUntilFlushed(t *testing.T) {
	t.Parallel()
	closer := newLateCloser(time.Hour, 8)
	c, _ := loopbackPair(t, newBufferPool())
	c.closer = closer
	inner := c.Conn.(*net.TCPConn)
	descriptorOpen := func() bool {
		rc, err := inner.SyscallConn()
		require.NoError(t, err)
		return rc.Control(func(uintptr) {}) == nil
	}
	require.NoError(t, c.Close())
	assert.True(t, descriptorOpen(), "shut down, parked")
	assert.Equal(t, 1, closer.parkedCount())
	closer.flush()
	assert.False(t, descriptorOpen(), "closed by the flush")
}

func TestHTTPClientDialClosesParkedDescriptors(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			}()
		}
	}()
	dial := NewHTTPClient().Transport.(*http.Transport).DialContext
	first, err := dial(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	raw := first.(*readAheadConn)
	require.NoError(t, first.Close())
	inner, err := raw.Conn.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	require.NoError(t, inner.Control(func(uintptr) {}), "parked until the next dial")
	second, err := dial(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer second.Close()
	assert.Error(t, inner.Control(func(uintptr) {}), "the next dial closed it")
}
