//go:build unix

package rawio

import (
	"bytes"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopback returns both ends of a loopback TCP connection, the client's as
// the raw connection Read and Write take.
func loopback(t *testing.T) (client syscall.RawConn, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() {
		_ = c.Close()
		_ = server.Close()
	})
	client, err = c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	return client, server
}

func TestWriteAndReadOverLoopback(t *testing.T) {
	rc, s := loopback(t)
	n, err := Write(rc, []byte("hello"))
	require.NoError(t, err)
	require.Equal(t, 5, n)
	buf := make([]byte, 5)
	_, err = io.ReadFull(s, buf)
	require.NoError(t, err)
	require.Equal(t, "hello", string(buf))
}

func TestAWriteGoesOutWhileAReadWaits(t *testing.T) {
	rc, s := loopback(t)
	go func() {
		buf := make([]byte, 5)
		_, _ = io.ReadFull(s, buf)
		_, _ = s.Write(buf)
	}()
	got := make(chan string)
	go func() {
		buf := make([]byte, 5)
		n, err := Read(rc, buf)
		assert.NoError(t, err)
		got <- string(buf[:n])
	}()
	time.Sleep(10 * time.Millisecond) // let the read wait first (either order must work)
	n, err := Write(rc, []byte("hello"))
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Equal(t, "hello", <-got)
}

// pipe returns a non-blocking pipe as the worker's stdio is made pollable.
func pipe(t *testing.T) (r, w *File) {
	t.Helper()
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	for _, fd := range fds {
		require.NoError(t, syscall.SetNonblock(fd, true))
	}
	rf, err := NewFile(os.NewFile(uintptr(fds[0]), "r"))
	require.NoError(t, err)
	wf, err := NewFile(os.NewFile(uintptr(fds[1]), "w"))
	require.NoError(t, err)
	return rf, wf
}

func TestFileMovesMoreThanThePipeHoldsAndEndsWithEOF(t *testing.T) {
	r, w := pipe(t)
	defer r.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: the writer waits for room
	go func() {
		n, err := w.Write(data)
		assert.NoError(t, err)
		assert.Equal(t, len(data), n)
		w.Close()
	}()
	got, err := io.ReadAll(r)
	require.NoError(t, err, "io.ReadAll stops at io.EOF")
	require.Equal(t, data, got)
}

func TestClosingAFileEndsAWaitingRead(t *testing.T) {
	r, w := pipe(t)
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, r.Close())
	err := <-done
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "read", pe.Op)
}

// The raw system calls themselves, which builds without the race detector
// use for every read and write (race builds go through package syscall).
func TestRawReadAndWrite(t *testing.T) {
	r, w := pipe(t)
	defer r.Close()
	defer w.Close()
	wrc, err := w.f.SyscallConn()
	require.NoError(t, err)
	require.NoError(t, wrc.Write(func(fd uintptr) bool {
		n, errno := rawWrite(fd, []byte("raw"))
		assert.Zero(t, errno)
		assert.Equal(t, 3, n)
		return true
	}))
	rrc, err := r.f.SyscallConn()
	require.NoError(t, err)
	buf := make([]byte, 8)
	require.NoError(t, rrc.Read(func(fd uintptr) bool {
		n, errno := rawRead(fd, buf)
		assert.Zero(t, errno)
		assert.Equal(t, "raw", string(buf[:n]))
		return true
	}))
	require.NoError(t, rrc.Read(func(fd uintptr) bool {
		_, errno := rawRead(fd, buf)
		assert.Equal(t, syscall.EAGAIN, errno, "an empty non-blocking pipe")
		return true
	}))
}
