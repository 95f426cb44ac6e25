package worker

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/paperclipai/daytona-worker/pty"
	"github.com/paperclipai/daytona-worker/rpc"
)

func TestSerialKeyOrdersOneRoutesWritesAndOneSessionsInput(t *testing.T) {
	t.Parallel()
	w := New(nil, Options{})
	defer func() { _ = w.ptys.Close(t.Context()) }()
	for _, tt := range []struct {
		method, params, want string
	}{
		{"duplexChannelWrite", `{"hostRouteId":"duplex-route-1","workerSessionId":"s","data":"AA=="}`, "duplex\x00duplex-route-1"},
		{"duplexChannelWrite", `{"data":"AA==","workerSessionId":"s","nested":{"hostRouteId":"x"},"hostRouteId":"duplex-route-2"}`, "duplex\x00duplex-route-2"},
		{"duplexChannelWrite", `{"hostRouteId":7}`, ""},
		{"duplexChannelWrite", `{"hostRouteId":`, ""},
		{"duplexChannelWrite", `[]`, ""},
		{"loginPtyInput", `{"workerSessionId":"pty-1","data":"code\r"}`, "login\x00pty-1"},
		{"loginPtyInput", `{"data":"x"}`, ""},
		// Stops and closes never wait behind a write.
		{"duplexChannelStop", `{"hostRouteId":"duplex-route-1","workerSessionId":"s"}`, ""},
		{"duplexChannelClose", `{"hostRouteId":"duplex-route-1"}`, ""},
		{"loginPtyStop", `{"workerSessionId":"pty-1"}`, ""},
		{"health", `{}`, ""},
	} {
		got := w.SerialKey(&rpc.Request{Method: tt.method, Params: json.RawMessage(tt.params)})
		assert.Equal(t, tt.want, got, "%s %s", tt.method, tt.params)
	}
}

func TestDuplexDataIsStreamedAsTheSDKEncodesIt(t *testing.T) {
	t.Parallel()
	d := duplexData{route: pty.Route{HostRouteID: "duplex-route-1", SessionID: `duplex-"q"`}, data: []byte{0, 0xff, '\n', 0xfe}}
	b, err := json.Marshal(d)
	assert.NoError(t, err)
	assert.Equal(t, `{"hostRouteId":"duplex-route-1","workerSessionId":"duplex-\"q\"","chunk":"AP8K/g=="}`, string(b))
}
