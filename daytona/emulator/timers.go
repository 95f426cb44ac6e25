package emulator

import (
	"cmp"
	"slices"
	"time"
)

// clockTimer is a delay measured on the emulator's clock
// (Options.ClockTimers): fire runs, with s.mu held, where the lifecycle
// timers are checked once the clock has reached at.
type clockTimer struct {
	at   time.Time
	seq  uint64 // orders timers due at the same time by creation
	fire func()
}

// afterLocked runs fn with s.mu held after d (at once when d <= 0), unless
// the server closes first. s.mu must be held.
func (s *Server) afterLocked(d time.Duration, fn func()) {
	if d <= 0 {
		fn()
		return
	}
	if s.opts.ClockTimers {
		s.addTimerLocked(d, fn)
		return
	}
	s.goLocked(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.ctx.Done():
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		fn()
	})
}

// timerLocked returns a channel that receives once d has passed, on real
// time or, with Options.ClockTimers, on the emulator's clock, and a stop
// that releases it (call it without s.mu: it may take it). s.mu must be
// held, so a clock that moves right after cannot miss the timer.
func (s *Server) timerLocked(d time.Duration) (<-chan time.Time, func()) {
	if !s.opts.ClockTimers {
		t := time.NewTimer(d)
		return t.C, func() { t.Stop() }
	}
	c := make(chan time.Time, 1)
	ct := s.addTimerLocked(d, func() { c <- s.nowLocked() })
	return c, func() {
		s.mu.Lock()
		delete(s.timers, ct)
		s.mu.Unlock()
	}
}

func (s *Server) addTimerLocked(d time.Duration, fire func()) *clockTimer {
	if s.timers == nil {
		s.timers = map[*clockTimer]struct{}{}
	}
	s.timerSeq++
	ct := &clockTimer{at: s.nowLocked().Add(d), seq: s.timerSeq, fire: fire}
	s.timers[ct] = struct{}{}
	return ct
}

// fireTimersLocked fires, in order, every clock timer due at now. What
// firing schedules is due after now (a delay is added to the clock, which
// does not go back), so it waits for a later check.
func (s *Server) fireTimersLocked(now time.Time) {
	var due []*clockTimer
	for ct := range s.timers {
		if !ct.at.After(now) {
			due = append(due, ct)
		}
	}
	slices.SortFunc(due, func(a, b *clockTimer) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq))
	})
	// None can stop another: stopping takes s.mu, held here throughout.
	for _, ct := range due {
		delete(s.timers, ct)
		ct.fire()
	}
}
