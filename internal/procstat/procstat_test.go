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
