package worker

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
)

// discardHost drops notifications and answers calls with null.
type discardHost struct{}

func (discardHost) Notify(context.Context, string, any) error    { return nil }
func (discardHost) Call(context.Context, string, any, any) error { return nil }

// BenchmarkExecuteInProcess runs environmentExecute of `true` through the
// worker's handler (no pipes, no host), for profiling the worker's own cost
// per command: go test -bench ExecuteInProcess -cpuprofile cpu.out ./worker/
func BenchmarkExecuteInProcess(b *testing.B) {
	env := emulatortest.Start(b, emulator.Options{})
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	l := acquireThroughHandler(b, w, env.APIKey, env.APIURL)
	ctx := context.Background()
	// Warm the session.
	if _, err := l.execute(ctx, `"command":"true"`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.execute(ctx, `"command":"true"`); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = l.destroy(ctx)
	_ = w.Close(ctx)
}
