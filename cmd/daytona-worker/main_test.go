package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedSink fails a write that arrives while ready is still open.
type gatedSink struct {
	ready <-chan struct{}
	lines []string
}

func (s *gatedSink) Write(p []byte) (int, error) {
	select {
	case <-s.ready:
	default:
		return 0, errors.New("written before the signal handlers were installed")
	}
	s.lines = append(s.lines, string(p))
	return len(p), nil
}

func TestFirstWriteWaitsForTheSignalHandlers(t *testing.T) {
	t.Parallel()
	ready := make(chan struct{})
	sink := &gatedSink{ready: ready}
	w := &afterReady{w: sink, ready: ready}
	wrote := make(chan error, 1)
	go func() {
		_, err := w.Write([]byte("first\n"))
		wrote <- err
	}()
	// Give a writer that does not wait the time to write too early; this
	// can only hide a defect on a very slow machine, never fail a good one.
	time.Sleep(20 * time.Millisecond)
	close(ready)
	require.NoError(t, <-wrote)
	n, err := w.Write([]byte("second\n"))
	require.NoError(t, err)
	assert.Equal(t, 7, n)
	assert.Equal(t, []string{"first\n", "second\n"}, sink.lines)
}
