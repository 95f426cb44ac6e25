package rpc

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the idle memory release.
const (
	defaultIdleReleaseBytes = 8 << 20
	defaultIdleReleaseDelay = time.Second
)

// idleRelease gives memory back to the system once the worker is idle after
// a burst of output. The runtime collects garbage only when the heap grows
// again, so a worker that has just written hundreds of MiB of results and
// then sits idle would keep that memory for minutes (until the forced GC
// every two minutes, and the scavenger's slow return after it). Once no
// request is in flight, at least threshold bytes were written since the
// last release and the worker has stayed idle for delay, release runs
// (by default two collections, then the freed memory returned at once).
type idleRelease struct {
	threshold int64
	delay     time.Duration
	release   func()

	written atomic.Int64 // bytes written since the last release

	mu      sync.Mutex
	active  int
	timer   *time.Timer
	armed   uint64 // which arming the pending timer belongs to
	closed  bool
	running sync.WaitGroup
}

func newIdleRelease(threshold int64, delay time.Duration, release func()) *idleRelease {
	if threshold <= 0 {
		threshold = defaultIdleReleaseBytes
	}
	if delay <= 0 {
		delay = defaultIdleReleaseDelay
	}
	if release == nil {
		release = freeMemory
	}
	return &idleRelease{threshold: threshold, delay: delay, release: release}
}

// wrote counts output bytes.
func (r *idleRelease) wrote(n int) { r.written.Add(int64(n)) }

// freeMemory collects twice, then returns the freed memory to the system:
// what sync.Pools hold survives one collection (as their victim cache).
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// begin marks a request in flight (and calls off a pending release).
func (r *idleRelease) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active++
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// end marks a request answered; the last one out arms the release when
// enough output went out since the last one.
func (r *idleRelease) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	if r.active > 0 || r.closed || r.timer != nil || r.written.Load() < r.threshold {
		return
	}
	r.armed++
	arming := r.armed
	r.timer = time.AfterFunc(r.delay, func() { r.fire(arming) })
}

func (r *idleRelease) fire(arming uint64) {
	r.mu.Lock()
	if r.timer == nil || r.armed != arming || r.active > 0 || r.closed {
		r.mu.Unlock()
		return
	}
	r.timer = nil
	r.written.Store(0)
	r.running.Add(1)
	r.mu.Unlock()
	defer r.running.Done()
	r.release()
}

// close stops any pending release and waits for one that is running.
func (r *idleRelease) close() {
	r.mu.Lock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.mu.Unlock()
	r.running.Wait()
}
