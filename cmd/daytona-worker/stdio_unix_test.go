//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pipe is reopened for the poller (it then takes deadlines, which only
// pollable files do); a terminal and a regular file are left as they are.
func TestPollableReopensPipesOnly(t *testing.T) {
	t.Parallel()
	// A pipe as a child finds it on its stdin: a blocking descriptor the
	// runtime has not registered.
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	w := os.NewFile(uintptr(fds[1]), "w")
	defer w.Close()
	in, restore, ok := pollable(fds[0], "r")
	require.True(t, ok)
	defer in.Close()
	require.NoError(t, in.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
	_, err := in.Read(make([]byte, 1))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "a read of the reopened pipe waits in the poller")
	_, err = w.WriteString("x")
	require.NoError(t, err)
	require.NoError(t, in.SetReadDeadline(time.Time{}))
	buf := make([]byte, 1)
	n, err := in.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "x", string(buf[:n]))
	restore()
	nonblock, err := isNonblock(fds[0])
	require.NoError(t, err)
	assert.False(t, nonblock, "restore puts the pipe back in blocking mode")

	// A pipe that is stderr too stays blocking: stderr is written without
	// the poller.
	var shared [2]int
	require.NoError(t, syscall.Pipe(shared[:]))
	sharedR, sharedW := os.NewFile(uintptr(shared[0]), "r"), os.NewFile(uintptr(shared[1]), "w")
	defer sharedR.Close()
	defer sharedW.Close()
	errFd, err := syscall.Dup(shared[1])
	require.NoError(t, err)
	defer syscall.Close(errFd)
	_, _, ok = pollableBeside(shared[1], "w", errFd)
	assert.False(t, ok, "stdout that is also stderr keeps its blocking mode")
	nonblock, err = isNonblock(shared[1])
	require.NoError(t, err)
	assert.False(t, nonblock)

	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	defer ptmx.Close()
	defer tty.Close()
	ttyFd := int(tty.Fd()) // blocking from here on
	_, _, ok = pollable(ttyFd, tty.Name())
	assert.False(t, ok, "a terminal keeps its blocking mode")
	nonblock, err = isNonblock(ttyFd)
	require.NoError(t, err)
	assert.False(t, nonblock, "the terminal's flags are untouched")

	f, err := os.CreateTemp(t.TempDir(), "stdin")
	require.NoError(t, err)
	defer f.Close()
	_, _, ok = pollable(int(f.Fd()), f.Name())
	assert.False(t, ok, "a file keeps its blocking mode")
}

func isNonblock(fd int) (bool, error) {
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFL, 0)
	if errno != 0 {
		return false, errors.New(errno.Error())
	}
	return flags&syscall.O_NONBLOCK != 0, nil
}
