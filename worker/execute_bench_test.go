package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/rpc"
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
	cfg := fmt.Sprintf(`{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000}`, env.APIKey, env.APIURL)
	base := `"driverKey":"daytona","companyId":"c","environmentId":"e","config":` + cfg
	ctx := context.Background()
	res, err := w.Handle(ctx, &rpc.Request{Method: "environmentAcquireLease", Params: json.RawMessage(`{` + base + `,"runId":"r"}`)})
	if err != nil {
		b.Fatal(err)
	}
	lease := *res.(leaseResult).ProviderLeaseID
	exec := json.RawMessage(`{` + base + `,"lease":{"providerLeaseId":"` + lease + `"},"command":"true"}`)
	// Warm the session.
	if _, err := w.Handle(ctx, &rpc.Request{Method: "environmentExecute", Params: exec}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Handle(ctx, &rpc.Request{Method: "environmentExecute", Params: exec}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_, _ = w.Handle(ctx, &rpc.Request{Method: "environmentDestroyLease", Params: json.RawMessage(`{` + base + `,"providerLeaseId":"` + lease + `"}`)})
	_ = w.Close(ctx)
}
