package procstat

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryOfThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	peak, rss, err := Memory(os.Getpid())
	require.NoError(t, err)
	assert.Greater(t, rss, 0.0)
	assert.GreaterOrEqual(t, peak, rss, "the peak is at least the current size")

	_, _, err = Memory(-1)
	assert.Error(t, err, "no such process")
}

func TestStatOfThisProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	f, err := Stat(os.Getpid())
	require.NoError(t, err)
	assert.Contains(t, "RSDTtWXZIP", f[0], "the state")
	_, err = Stat(-1)
	assert.Error(t, err, "no such process")
}

func TestMachineCPUMovesForward(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	t0, err := Machine()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, t0.CPUs, 1.0)
	assert.Greater(t, t0.Total, t0.Busy)
	t1, err := Machine()
	require.NoError(t, err)
	busy := t1.BusySince(t0)
	assert.GreaterOrEqual(t, busy, 0.0)
	assert.LessOrEqual(t, busy, t1.CPUs)
	assert.Zero(t, t0.BusySince(t0), "no time passed")
}
