// Package emulatortest starts a Daytona emulator behind an httptest server
// for one test and tears everything down with it.
package emulatortest

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// Env is a running emulator.
type Env struct {
	Server *emulator.Server // state manipulation, faults, introspection
	HTTP   *httptest.Server
	APIURL string // control-plane base, e.g. http://127.0.0.1:PORT/api
	APIKey string // the bearer key the emulator accepts
}

// Start runs an emulator for t. An empty opts.Root becomes t.TempDir(); a nil
// opts.Logger logs warnings and errors to t.Log. t.Cleanup closes the
// emulator (killing every sandbox process) and then the HTTP server.
func Start(t testing.TB, opts emulator.Options) *Env {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	if opts.Logger == nil {
		l := zerolog.New(zerolog.ConsoleWriter{Out: testWriter{t}, NoColor: true}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
		opts.Logger = &l
	}
	srv, err := emulator.New(opts)
	if err != nil {
		t.Fatalf("emulatortest: start emulator: %v", err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("emulatortest: close emulator: %v", err)
		}
		ts.Close()
	})
	key := opts.APIKey
	if key == "" {
		key = emulator.DevAPIKey
	}
	return &Env{Server: srv, HTTP: ts, APIURL: ts.URL + "/api", APIKey: key}
}

// AdvanceWhen moves the emulator's clock by d, from a goroutine, as soon as
// ready reports true (it is polled every few milliseconds). With
// Options.ClockTimers and a Clock that stands still, the emulator's delays
// then fall due at the point the test chooses rather than after real time.
// The channel it returns is closed once the clock has moved; the goroutine
// gives up when the test ends.
func (e *Env) AdvanceWhen(t testing.TB, ready func() bool, d time.Duration) <-chan struct{} {
	t.Helper()
	moved := make(chan struct{})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for !ready() {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
		e.Server.AdvanceClock(d)
		close(moved)
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	return moved
}

// ToolboxURL is the toolbox base for a sandbox, as clients derive it from
// the sandbox's toolboxProxyUrl.
func (e *Env) ToolboxURL(sandboxID string) string {
	return e.HTTP.URL + "/toolbox/" + sandboxID
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
