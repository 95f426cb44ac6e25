package worker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
)

// The runtime's own methods, and methods nobody defines, answer as the
// official runtime does for a plugin without those hooks (the same answers
// as testdata/transcripts/lifecycle.scenario, here without the binary).
func TestHandleAnswersWhatThePluginDefinesNoHookFor(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	tests := []struct {
		method, params string
		code           int // 0: a plain error, which the host gets as -32002
		message        string
	}{
		{"runJob", `{"job":{"jobKey":"nightly"}}`, 0, `No handler registered for job "nightly"`},
		{"runJob", `null`, 0, `No handler registered for job ""`},
		{"getData", `{"key":"k"}`, 0, `No data handler registered for key "k"`},
		{"performAction", `{"key":"act"}`, 0, `No action handler registered for key "act"`},
		{"executeTool", `{"toolName":"t"}`, 0, `No tool handler registered for "t"`},
		{"validateConfig", `{"config":{}}`, protocol.CodeMethodNotImplemented, "validateConfig is not implemented by this plugin"},
		{"handleWebhook", `{}`, protocol.CodeMethodNotImplemented, "handleWebhook is not implemented by this plugin"},
		{"refreshExternalObjects", `{}`, protocol.CodeMethodNotImplemented, "refreshExternalObjects is not implemented by this plugin"},
		{"environmentFrobnicate", `{}`, protocol.CodeMethodNotFound, "Unknown method: environmentFrobnicate"},
		{"setupTokenPtyOpen", `{}`, protocol.CodeMethodNotFound, "Unknown method: setupTokenPtyOpen"},
	}
	for _, tt := range tests {
		res, err := w.Handle(t.Context(), requestOf(tt.method, tt.params))
		assert.Nil(t, res, tt.method)
		require.EqualError(t, err, tt.message, tt.method)
		var pe *protocol.Error
		if tt.code == 0 {
			assert.False(t, errors.As(err, &pe), "%s: a protocol error (%v) where the runtime throws", tt.method, pe)
			continue
		}
		require.True(t, errors.As(err, &pe), "%s: no protocol error", tt.method)
		assert.Equal(t, tt.code, pe.Code, tt.method)
	}

	res, err := w.Handle(t.Context(), requestOf("onEvent", `{"event":{"eventType":"x"}}`))
	assert.NoError(t, err, "the plugin subscribes to no events, and takes any")
	assert.Nil(t, res)
	res, err = w.Handle(t.Context(), requestOf("health", `{}`))
	require.NoError(t, err)
	assert.Equal(t, protocol.HealthResult{Status: "ok", Message: healthyMessage}, res)
}

// recordingHost records the notifications it is given, and fails each
// with err.
type recordingHost struct {
	discardHost
	err error

	mu    sync.Mutex
	notes []string // method, then the params' JSON
}

func (h *recordingHost) Notify(_ context.Context, method string, params any) error {
	b, _ := json.Marshal(params)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notes = append(h.notes, method+" "+string(b))
	return h.err
}

// initialize logs the plugin's ready message once, before its reply, and is
// answered even when that log cannot be delivered; a second initialize is
// refused and logs nothing.
func TestInitializeAnswersOnceEvenWhenTheReadyLogIsLost(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{false, true} {
		h := &recordingHost{}
		if lost {
			h.err = errors.New("host gone")
		}
		w := New(h, Options{Logger: zerolog.Nop()})
		res, err := w.Handle(t.Context(), requestOf("initialize", `{"manifest":{},"config":{},"apiVersion":"two"}`))
		require.NoError(t, err, "lost=%v", lost)
		assert.Equal(t, protocol.InitializeResult{OK: true, SupportedMethods: protocol.SupportedMethods()}, res)
		_, err = w.Handle(t.Context(), requestOf("initialize", `{}`))
		assert.EqualError(t, err, "Worker already initialized")
		assert.Equal(t, []string{`log {"level":"info","message":"Daytona sandbox provider plugin ready"}`}, h.notes, "lost=%v", lost)
		require.NoError(t, w.Close(t.Context()))
	}
}
