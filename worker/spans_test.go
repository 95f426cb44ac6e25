package worker

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/protocol"
)

// The shutdown request closes the worker (waitSpans) before it drains the
// requests in flight, so a sync still running sends spans while Close waits
// for the earlier ones. A sync.WaitGroup forbids exactly that (an Add at
// zero during a Wait): it panicked on the waiting goroutine or on a span's
// own, either of which takes the worker down. The senders send a fixed
// number of spans, so the test ends on one processor too, where a wait may
// last until they are all done.
func TestSpansSentWhileClosingWaitsForThemWithoutPanicking(t *testing.T) {
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	const senders, sends = 4, 5000
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range sends {
				w.sendSpan(context.Background(), protocol.SpanRecord{Name: "transfer"})
				// Lets the spans in flight drop to none now and then.
				runtime.Gosched()
			}
		}()
	}
	sent := make(chan struct{})
	go func() {
		wg.Wait()
		close(sent)
	}()
	for {
		w.waitSpans(context.Background())
		select {
		case <-sent:
			w.waitSpans(context.Background())
			return
		default:
		}
		// A wait that returned at once would otherwise hold the one
		// processor until preempted.
		runtime.Gosched()
	}
}
