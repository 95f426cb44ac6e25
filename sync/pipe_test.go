package sync

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBufferedPipeCarriesBytesInOrder(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	r, w := newBufferedPipe(4, 64<<10)
	go func() {
		rest := data
		for len(rest) > 0 {
			n := min(len(rest), 1+rand.IntN(100_000))
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
		}
		_ = w.Close()
	}()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got))
}

func TestBufferedPipeErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r, w := newBufferedPipe(2, 8)
	_, err := w.Write([]byte("0123456789"))
	require.NoError(t, err, "the buffer takes it without a reader")
	require.NoError(t, w.CloseWithError(boom))
	got, err := io.ReadAll(r)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, "0123456789", string(got), "bytes written before the close are read first")

	// A reader that gives up unblocks a writer waiting for room.
	r, w = newBufferedPipe(1, 4)
	done := make(chan error, 1)
	go func() { _, err := w.Write(make([]byte, 100)); done <- err }()
	buf := make([]byte, 2)
	_, err = r.Read(buf)
	require.NoError(t, err)
	require.NoError(t, r.CloseWithError(boom))
	assert.ErrorIs(t, <-done, boom)
	_, err = w.Write([]byte("x"))
	assert.ErrorIs(t, err, boom)
}
