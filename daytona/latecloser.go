package daytona

import (
	"io"
	"sync"
	"time"
)

// lateCloser closes the descriptors of finished connections a little later,
// at a moment the process is making a blocking-announced system call anyway.
//
// Why: close(2) is the one system call left on a connection's path that Go
// announces to its scheduler (net and os close through syscall.Close). After
// an idle spell the first announced call wakes the runtime's monitor thread
// from its deep sleep, and it then ticks every 20 µs for as long as the
// process is busy: about 7% of the worker's CPU per execute, whose log
// WebSocket is a connection of its own, closed at the end of every command.
// The next dial's connect(2) is announced too and wakes the monitor anyway,
// so the closes parked until then cost no wake-up of their own. A connection
// parked here has already been shut down (its peer has seen the end of it
// and nothing can be read or written); only its descriptor waits.
//
// Parked descriptors are closed at the next dial (flush), after delay when
// no dial comes, or at once when more than max are parked.
type lateCloser struct {
	delay time.Duration
	max   int

	mu     sync.Mutex
	parked []io.Closer
	timer  *time.Timer // nil while nothing is parked
}

// The delay is long enough for the next command of an agent that runs them
// one after another, and short enough that a quiet worker holds no stale
// descriptors for long; the bound keeps a burst of commands from piling them up.
const (
	lateCloseDelay = 2 * time.Second
	lateCloseMax   = 64
)

func newLateCloser(delay time.Duration, max int) *lateCloser {
	return &lateCloser{delay: delay, max: max}
}

// park closes c later.
func (l *lateCloser) park(c io.Closer) {
	l.mu.Lock()
	l.parked = append(l.parked, c)
	if len(l.parked) > l.max {
		batch := l.takeLocked()
		l.mu.Unlock()
		closeAll(batch)
		return
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(l.delay, l.flush)
	}
	l.mu.Unlock()
}

// flush closes everything parked.
func (l *lateCloser) flush() {
	l.mu.Lock()
	batch := l.takeLocked()
	l.mu.Unlock()
	closeAll(batch)
}

func (l *lateCloser) takeLocked() []io.Closer {
	batch := l.parked
	l.parked = nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	return batch
}

func closeAll(batch []io.Closer) {
	for _, c := range batch {
		_ = c.Close()
	}
}
