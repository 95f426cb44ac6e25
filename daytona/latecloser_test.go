package daytona

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parkedCount is how many descriptors wait to be closed.
func (l *lateCloser) parkedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.parked)
}

// countingCloser counts its Close calls.
type countingCloser struct{ closes atomic.Int32 }

func (c *countingCloser) Close() error {
	c.closes.Add(1)
	return nil
}

func TestLateCloserClosesAtFlushOnceEach(t *testing.T) {
	t.Parallel()
	l := newLateCloser(time.Hour, 8)
	a, b := &countingCloser{}, &countingCloser{}
	l.park(a)
	l.park(b)
	assert.Zero(t, a.closes.Load()+b.closes.Load(), "parked, not closed")
	assert.Equal(t, 2, l.parkedCount())
	l.flush()
	assert.EqualValues(t, 1, a.closes.Load())
	assert.EqualValues(t, 1, b.closes.Load())
	assert.Zero(t, l.parkedCount())
	l.flush()
	assert.EqualValues(t, 1, a.closes.Load(), "a flush closes what it took, once")
}

func TestLateCloserClosesAfterItsDelayWhenNoFlushComes(t *testing.T) {
	t.Parallel()
	l := newLateCloser(time.Millisecond, 8)
	c := &countingCloser{}
	l.park(c)
	require.Eventually(t, func() bool { return c.closes.Load() == 1 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, l.parkedCount())
	// A later park arms a new timer.
	d := &countingCloser{}
	l.park(d)
	require.Eventually(t, func() bool { return d.closes.Load() == 1 }, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, c.closes.Load())
}

func TestLateCloserClosesAtOnceBeyondItsBound(t *testing.T) {
	t.Parallel()
	l := newLateCloser(time.Hour, 2)
	cs := []*countingCloser{{}, {}, {}}
	l.park(cs[0])
	l.park(cs[1])
	assert.Zero(t, cs[0].closes.Load())
	l.park(cs[2])
	for i, c := range cs {
		assert.EqualValues(t, 1, c.closes.Load(), "closer %d", i)
	}
	assert.Zero(t, l.parkedCount())
}
