package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worker's stdout pipe grows to 1 MiB (both ends see the one pipe);
// anything else is left alone.
func TestGrowPipeGrowsPipesOnly(t *testing.T) {
	t.Parallel()
	const fGetPipeSize = 1032 // F_GETPIPE_SZ
	var fds [2]int
	require.NoError(t, syscall.Pipe(fds[:]))
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	size := func(fd int) int {
		n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), fGetPipeSize, 0)
		require.Zero(t, errno)
		return int(n)
	}
	require.Less(t, size(fds[0]), stdoutPipeSize, "a new pipe starts smaller")
	growPipe(fds[1])
	assert.Equal(t, stdoutPipeSize, size(fds[0]), "the reader's end sees the grown pipe")

	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	growPipe(int(f.Fd())) // not a pipe: nothing to do, nothing fails
	_, err = f.WriteString("x")
	assert.NoError(t, err)
}
