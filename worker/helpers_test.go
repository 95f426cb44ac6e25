package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/rpc"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// handlerLease is a lease acquired by calling a worker's handler directly
// (no pipes, no host), with the params its methods need.
type handlerLease struct {
	w    *Worker
	base string // driverKey, scope and config members of every call
	id   string
}

// acquireThroughHandler acquires a lease from the emulator at apiURL; extra
// config members may follow (e.g. `"autoStopInterval":1`).
func acquireThroughHandler(tb testing.TB, w *Worker, apiKey, apiURL string, extraConfig ...string) *handlerLease {
	tb.Helper()
	cfg := fmt.Sprintf(`{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000`, apiKey, apiURL)
	for _, member := range extraConfig {
		cfg += "," + member
	}
	cfg += "}"
	l := &handlerLease{w: w, base: `"driverKey":"daytona","companyId":"c","environmentId":"e","config":` + cfg}
	res, err := w.Handle(context.Background(), &rpc.Request{Method: "environmentAcquireLease", Params: json.RawMessage(`{` + l.base + `,"runId":"r"}`)})
	if err != nil {
		tb.Fatal(err)
	}
	l.id = *res.(leaseResult).ProviderLeaseID
	return l
}

// execute runs environmentExecute with the command and args members given
// as JSON (e.g. `"command":"true"`).
func (l *handlerLease) execute(ctx context.Context, command string) (any, error) {
	params := json.RawMessage(`{` + l.base + `,"lease":{"providerLeaseId":"` + l.id + `"},` + command + `}`)
	return l.w.Handle(ctx, &rpc.Request{Method: "environmentExecute", Params: params})
}

// destroy deletes the lease's sandbox.
func (l *handlerLease) destroy(ctx context.Context) error {
	_, err := l.w.Handle(ctx, &rpc.Request{Method: "environmentDestroyLease", Params: json.RawMessage(`{` + l.base + `,"providerLeaseId":"` + l.id + `"}`)})
	return err
}

// requestOf is a request for Handle.
func requestOf(method, params string) *rpc.Request {
	return &rpc.Request{Method: method, Params: json.RawMessage(params)}
}

// leaseOnEmulator starts an emulator with opts and a worker (closed when the
// test ends), and acquires a lease from it through the handler; extra config
// members may follow, as for acquireThroughHandler.
func leaseOnEmulator(t *testing.T, opts emulator.Options, extraConfig ...string) (*emulatortest.Env, *Worker, *handlerLease) {
	t.Helper()
	return leaseOnEmulatorTiming(t, opts, Timing{}, extraConfig...)
}

// leaseOnEmulatorTiming is leaseOnEmulator with a worker of the given Timing.
func leaseOnEmulatorTiming(t *testing.T, opts emulator.Options, timing Timing, extraConfig ...string) (*emulatortest.Env, *Worker, *handlerLease) {
	t.Helper()
	env := emulatortest.Start(t, opts)
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Timing: timing})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return env, w, acquireThroughHandler(t, w, env.APIKey, env.APIURL, extraConfig...)
}

// emulatorClient is a Daytona client of the emulator's account, for looking
// behind the worker's back.
func emulatorClient(t *testing.T, env *emulatortest.Env) *daytona.Client {
	t.Helper()
	c, err := daytona.New(daytona.Config{APIKey: env.APIKey, APIURL: env.APIURL})
	require.NoError(t, err)
	return c
}
