package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
	"github.com/paperclipai/daytona-worker/worker/config"
)

func TestTimeoutSeconds(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 1, timeoutSeconds(1))
	assert.Equal(t, 1, timeoutSeconds(0))
	assert.Equal(t, 300, timeoutSeconds(300000))
	assert.Equal(t, 301, timeoutSeconds(300001))
	// Any finite number is a timeout to JavaScript: past what a Duration
	// holds, the seconds saturate instead of wrapping around.
	assert.Equal(t, maxTimeoutSeconds, timeoutSeconds(1e22))
	assert.Equal(t, 1e19, jsTimeoutSeconds(1e22))
	assert.Positive(t, time.Duration(timeoutSeconds(1e300))*time.Second)
}

// TestEveryConfigTakingHandlerReadsTheConfigAsThePluginDoes drives each
// handler that takes a config through the worker. The plugin reads the
// config's members without a check: an absent or null config throws there
// (invalid params here, before any call to Daytona: there is no emulator
// here to call), while a config that is not an object has none of the
// members it reads and parses as an empty one.
func TestEveryConfigTakingHandlerReadsTheConfigAsThePluginDoes(t *testing.T) {
	t.Parallel()
	w := New(discardHost{}, Options{Logger: zerolog.Nop(), Getenv: func(string) string { return "" }})
	lease := `"lease":{"providerLeaseId":"sbx-1"}`
	for _, tt := range []struct{ method, extra string }{
		{protocol.MethodEnvironmentValidateConfig, ``},
		{protocol.MethodEnvironmentProbe, ``},
		{protocol.MethodEnvironmentAcquireLease, `,"runId":"r"`},
		{protocol.MethodEnvironmentResumeLease, `,"providerLeaseId":"sbx-1"`},
		{protocol.MethodEnvironmentReleaseLease, `,"providerLeaseId":"sbx-1"`},
		{protocol.MethodEnvironmentStopLease, `,"providerLeaseId":"sbx-1"`},
		{protocol.MethodEnvironmentDestroyLease, `,"providerLeaseId":"sbx-1"`},
		{protocol.MethodEnvironmentRealizeWorkspace, `,` + lease + `,"workspace":{}`},
		{protocol.MethodEnvironmentExecute, `,` + lease + `,"command":"true"`},
		{protocol.MethodEnvironmentRunnerIngressEndpoint, `,` + lease + `,"port":43127,"path":"/api/runner/v1/connect/r-1"`},
		{protocol.MethodEnvironmentStartInteractiveSetup, `,"sessionId":"s-1"`},
		{protocol.MethodEnvironmentGetInteractiveSetup, `,"providerLeaseId":"sbx-1"`},
		{protocol.MethodEnvironmentCancelInteractiveSetup, `,"providerLeaseId":"sbx-1"`},
		{protocol.MethodEnvironmentCaptureTemplate, `,"providerLeaseId":"sbx-1"`},
		{protocol.MethodEnvironmentDeleteTemplate, `,"templateRef":"tpl-1"`},
	} {
		for _, cfg := range []string{``, `,"config":null`} {
			params := json.RawMessage(`{"driverKey":"daytona","companyId":"c","environmentId":"e"` + cfg + tt.extra + `}`)
			_, err := w.Handle(context.Background(), &rpc.Request{Method: tt.method, Params: params})
			var rpcErr *protocol.Error
			if assert.ErrorAs(t, err, &rpcErr, "%s with config %q", tt.method, cfg) {
				assert.Equal(t, protocol.CodeInvalidParams, rpcErr.Code, tt.method)
				assert.Equal(t, "Invalid params for "+tt.method+": params.config must be an object", rpcErr.Message, tt.method)
			}
		}
	}
	for _, cfg := range []string{`[1]`, `"x"`, `7`, `true`} {
		rc, parsed, err := config.Decode(protocol.MethodEnvironmentExecute, json.RawMessage(cfg))
		require.NoError(t, err, cfg)
		assert.Empty(t, rc, cfg)
		assert.Equal(t, float64(config.DefaultTimeoutMs), parsed.TimeoutMs, cfg)
		res, err := w.Handle(context.Background(), &rpc.Request{Method: protocol.MethodEnvironmentValidateConfig,
			Params: json.RawMessage(`{"driverKey":"daytona","config":` + cfg + `}`)})
		require.NoError(t, err, cfg)
		assert.Equal(t, validationResult{OK: false, Errors: []string{config.MsgAPIKeyRequired}}, res, cfg)
	}
}
