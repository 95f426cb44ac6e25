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
)

func rawOf(t *testing.T, js string) rawConfig {
	t.Helper()
	rc, err := decodeRawConfig(json.RawMessage(js))
	require.NoError(t, err)
	return rc
}

// As in the plugin, a timeoutMs past 64 bits is out of range, not absent.
func TestTimeoutMsPast64BitsIsOutOfRange(t *testing.T) {
	t.Parallel()
	cfg := parseDriverConfig(rawConfig{"timeoutMs": "0x1FFFFFFFFFFFFFFFFF"})
	assert.Equal(t, 590295810358705700000.0, cfg.TimeoutMs)
	assert.Contains(t, validateDriverConfig(rawConfig{"timeoutMs": "0x1FFFFFFFFFFFFFFFFF"}, cfg, "key"), "timeoutMs must be between 1 and 86400000.")
}

func TestParseDriverConfigDefaultsAndCoercions(t *testing.T) {
	t.Parallel()
	c := parseDriverConfig(rawOf(t, `{"unknown":1,"image":"  daytonaio/sandbox:0.8.0 ","apiKey":"k"}`))
	out, err := json.Marshal(c)
	require.NoError(t, err)
	assert.Equal(t, `{"apiKey":"k","apiUrl":null,"target":null,"snapshot":null,"image":"daytonaio/sandbox:0.8.0","language":null,"timeoutMs":300000,"livenessTimeoutMs":30000,"cpu":null,"memory":null,"disk":null,"gpu":null,"autoStopInterval":15,"autoArchiveInterval":60,"autoDeleteInterval":10080,"reuseLease":false,"archiveOnRelease":false}`, string(out))

	c = parseDriverConfig(rawOf(t, `{"timeoutMs":"1500.9","livenessTimeoutMs":"nope","autoStopInterval":0,"autoArchiveInterval":"","autoDeleteInterval":-1,"cpu":"2.5","memory":4,"disk":null,"gpu":"","reuseLease":"true","archiveOnRelease":true,"snapshot":"   "}`))
	assert.Equal(t, 1500.0, c.TimeoutMs)
	assert.Equal(t, 30000.0, c.LivenessTimeoutMs, "a non-numeric value falls back to the default")
	assert.Equal(t, 0.0, c.AutoStopInterval, "an explicit 0 is kept")
	assert.Equal(t, 60.0, c.AutoArchiveInterval, "an empty string means unset")
	assert.Equal(t, -1.0, c.AutoDeleteInterval, "an explicit -1 is kept")
	assert.Equal(t, 2.5, *c.CPU)
	assert.Equal(t, 4.0, *c.Memory)
	assert.Nil(t, c.Disk)
	assert.Nil(t, c.GPU)
	assert.False(t, c.ReuseLease, "only the boolean true counts")
	assert.True(t, c.ArchiveOnRelease)
	assert.Nil(t, c.Snapshot)
}

func TestValidateDriverConfigMessagesInOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		env    string
		want   []string
	}{
		{name: "valid with env key", config: `{}`, env: "k", want: nil},
		{name: "valid with config key", config: `{"apiKey":"k","image":"img","cpu":2}`, want: nil},
		{name: "no key anywhere", config: `{"apiKey":"  "}`, env: " ", want: []string{msgAPIKeyRequired}},
		{name: "everything wrong", env: "k",
			config: `{"image":" ","snapshot":"","apiUrl":"not a url","timeoutMs":0,"livenessTimeoutMs":86400001,"autoStopInterval":-1,"autoArchiveInterval":-5,"autoDeleteInterval":-2,"cpu":0,"memory":-1,"disk":2,"gpu":0}`,
			want: []string{
				"Daytona image cannot be empty.",
				"Daytona snapshot cannot be empty.",
				"apiUrl must be a valid URL.",
				"timeoutMs must be between 1 and 86400000.",
				"livenessTimeoutMs must be less than or equal to 86400000.",
				"autoStopInterval must be greater than or equal to 0.",
				"autoArchiveInterval must be greater than or equal to 0.",
				"autoDeleteInterval must be greater than or equal to -1.",
				msgResourcesNeedImage,
				"cpu must be greater than 0 when provided.",
				"memory must be greater than 0 when provided.",
				"gpu must be greater than 0 when provided.",
			}},
		{name: "image and snapshot", env: "k", config: `{"image":"a","snapshot":"b"}`,
			want: []string{"Daytona sandbox environments must set either image or snapshot, not both."}},
		{name: "timeout too large", env: "k", config: `{"timeoutMs":86400001}`, want: []string{"timeoutMs must be between 1 and 86400000."}},
		{name: "liveness disabled is fine", env: "k", config: `{"livenessTimeoutMs":0}`, want: nil},
		{name: "resources with snapshot", env: "k", config: `{"snapshot":"s","memory":2}`, want: []string{msgResourcesNeedImage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := rawOf(t, tt.config)
			assert.Equal(t, tt.want, validateDriverConfig(rc, parseDriverConfig(rc), tt.env))
		})
	}
}

// The answers are Node 20's `new URL(s)` (throws or not), which the plugin's
// check is; a random corpus of 5,425 special-scheme URLs agreed too. Not
// repeated: IDNA's own checks of `xn--` labels (Node refuses "http://xn--").
func TestIsValidURL(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"https://app.daytona.io/api": true,
		"http://127.0.0.1:4000/api":  true,
		"http:/x":                    true,
		"foo:bar":                    true,
		"not a url":                  false,
		"http://":                    false,
		"/relative":                  false,
		"app.daytona.io":             false,
		"http://exa mple.com":        false,
		"http://1.2.3.4.5":           false,
		"http://999.1.1.1":           false,
		"http://x:99999":             false,
		"http://a<b":                 false,
		"http://%41.com":             true,
		" https://x.io":              true,
		"https://x.io ":              true,
		"\thttps://x.io":             true,
		"https://x\n.io":             true,
		"http://0x7f.1":              true,
		"http://0x7g.1":              false,
		"http://1.2.3":               true,
		"http://4294967295":          true,
		"http://4294967296":          false,
		"http://1.2.3.256":           false,
		"http://1.2.3.4.":            true,
		"http://1.2.3.4..":           true,
		"http://a.1":                 false,
		"http://1.a":                 true,
		"http://a.0x":                false,
		"http://a.09":                false,
		"http://a.08.":               false,
		"http://x:65535":             true,
		"http://x:65536":             false,
		"http://x:":                  true,
		"http://x:12a":               false,
		"http://[::1]:80":            true,
		"http://[::1":                false,
		"http://user:pw@host":        true,
		"http://@host":               true,
		"http://user@":               false,
		"http://a^b":                 false,
		"http://a|b":                 false,
		"http://a%b":                 false,
		"http://a%2fb":               false,
		"http://a%00b":               false,
		"https://exa_mple.com":       true,
		"https://ex~ample.com":       true,
		"https://ÄÖ.com":             true,
		"http:\\\\x.io\\api":         true,
		"HTTP://X.IO":                true,
		"http://x.io:0080":           true,
		"http://x.io?q":              true,
		"http://x.io#f":              true,
		"http://[v1.x]":              false,
		"wss://h":                    true,
		"ftp://h":                    true,
		"file:///x":                  true,
		"file://h/x":                 true,
		"mailto:x":                   true,
		"http://.":                   true,
		"http://..":                  true,
		"http://a..b":                true,
		"http://0":                   true,
		"http://00":                  true,
		"http://0x":                  true,
		"http://1.0x":                true,
		"http://%30x7f.1":            true,
		"http://a:b@c:d":             false,
	} {
		assert.Equal(t, want, isValidURL(s), "%q", s)
	}
}

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
		rc, parsed, err := decodeConfig(protocol.MethodEnvironmentExecute, json.RawMessage(cfg))
		require.NoError(t, err, cfg)
		assert.Empty(t, rc, cfg)
		assert.Equal(t, float64(defaultTimeoutMs), parsed.TimeoutMs, cfg)
		res, err := w.Handle(context.Background(), &rpc.Request{Method: protocol.MethodEnvironmentValidateConfig,
			Params: json.RawMessage(`{"driverKey":"daytona","config":` + cfg + `}`)})
		require.NoError(t, err, cfg)
		assert.Equal(t, validationResult{OK: false, Errors: []string{msgAPIKeyRequired}}, res, cfg)
	}
}
