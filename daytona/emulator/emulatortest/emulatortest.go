// Package emulatortest starts a Daytona emulator behind an httptest server
// for one test and tears everything down with it.
package emulatortest

import (
	"net/http/httptest"
	"strings"
	"testing"

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
