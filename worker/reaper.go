package worker

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Reapers finish the cleanup of captures that gave up while Daytona was still
// snapshotting: the snapshot only appears when the job ends, minutes later
// perhaps, long after the capture answered the host. The first check comes
// Timing.ReaperFirstCheck after the capture gave up; the period then grows.
const (
	reaperMaxPeriod  = 10 * time.Second
	reaperMaxAge     = time.Hour
	reaperCheckBound = cleanupGrace
)

// reapers owns the background cleanups, keyed by account and snapshot name.
// Close stops them (a snapshot recorded after that is left, and logged).
type reapers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	byKey map[string][]*reaper
}

// reaper repeats check until it reports done. Checks never overlap.
type reaper struct {
	mu    sync.Mutex
	check func(context.Context) bool
	done  bool
}

func newReapers() *reapers {
	ctx, cancel := context.WithCancel(context.Background())
	return &reapers{ctx: ctx, cancel: cancel, byKey: map[string][]*reaper{}}
}

// run performs one check unless an earlier one finished the job, and
// reports whether the reaper is done.
func (r *reaper) run(ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		cctx, cancel := context.WithTimeout(ctx, reaperCheckBound)
		r.done = r.check(cctx)
		cancel()
	}
	return r.done
}

// start watches in the background until check reports done, for at most
// reaperMaxAge.
func (rs *reapers) start(w *Worker, key string, check func(context.Context) bool) {
	r := &reaper{check: check}
	rs.mu.Lock()
	if rs.ctx.Err() != nil {
		rs.mu.Unlock()
		return
	}
	rs.byKey[key] = append(rs.byKey[key], r)
	rs.wg.Add(1)
	rs.mu.Unlock()
	go func() {
		defer rs.wg.Done()
		defer rs.forget(key, r)
		ctx, cancel := context.WithTimeout(rs.ctx, reaperMaxAge)
		defer cancel()
		period := w.timing.ReaperFirstCheck
		for {
			t := time.NewTimer(period)
			select {
			case <-ctx.Done():
				t.Stop()
				why := "gave up waiting for the snapshot job of a failed capture"
				if rs.ctx.Err() != nil {
					why = "shutting down before the snapshot job of a failed capture ended"
				}
				w.log.Warn().Str("key", key[strings.IndexByte(key, 0)+1:]).Msg(why + "; a snapshot it records later is left behind")
				return
			case <-t.C:
			}
			if r.run(ctx) {
				return
			}
			period = min(period*3/2, reaperMaxPeriod)
		}
	}()
}

func (rs *reapers) forget(key string, r *reaper) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.byKey[key] = slices.DeleteFunc(rs.byKey[key], func(x *reaper) bool { return x == r })
	if len(rs.byKey[key]) == 0 {
		delete(rs.byKey, key)
	}
}

// settle runs the pending cleanups of key now, and reports whether none is
// left pending (a snapshot job of an earlier capture still running).
func (rs *reapers) settle(ctx context.Context, key string) bool {
	rs.mu.Lock()
	pending := slices.Clone(rs.byKey[key])
	rs.mu.Unlock()
	settled := true
	for _, r := range pending {
		if r.run(ctx) {
			rs.forget(key, r)
			continue
		}
		settled = false
	}
	return settled
}

// close stops every reaper and waits for them (up to ctx).
func (rs *reapers) close(ctx context.Context) {
	rs.mu.Lock()
	rs.cancel()
	rs.mu.Unlock()
	done := make(chan struct{})
	go func() {
		rs.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
