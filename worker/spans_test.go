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
// own, either of which takes the worker down.
func TestSpansSentWhileClosingWaitsForThemWithoutPanicking(t *testing.T) {
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	const senders, waits = 4, 20000
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.sendSpan(context.Background(), protocol.SpanRecord{Name: "transfer"})
				// Lets the spans in flight drop to none now and then.
				runtime.Gosched()
			}
		}()
	}
	for range waits {
		w.waitSpans(context.Background())
	}
	close(stop)
	wg.Wait()
	w.waitSpans(context.Background())
}
