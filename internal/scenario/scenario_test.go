package scenario

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	t.Parallel()
	vars := Vars{"URL": StringVar("http://127.0.0.1:9/api"), "N": json.RawMessage(`7`)}
	tests := []struct {
		name, expected, actual string
		wantErr                string
	}{
		{"key order and spacing ignored", `{"a":1,"b":[true,null]}`, `{ "b":[true,null], "a":1 }`, ""},
		{"numbers compare exactly", `{"id":9007199254740993}`, `{"id":9007199254740992}`, "$.id: want 9007199254740993"},
		{"equal numbers in other forms", `{"n":1}`, `{"n":1.0}`, ""},
		{"missing key", `{"a":1,"b":2}`, `{"a":1}`, `missing key "b"`},
		{"unexpected key", `{"a":1}`, `{"a":1,"b":2}`, `unexpected key "b"`},
		{"any", `{"a":"<any>"}`, `{"a":{"deep":[1]}}`, ""},
		{"uuid", `{"a":"<uuid>"}`, `{"a":"0b0e8d43-7c2c-4a6e-9d3b-4a8e2f1c0d9e"}`, ""},
		{"not a uuid", `{"a":"<uuid>"}`, `{"a":"nope"}`, "want <uuid>"},
		{"inline uuid", `{"a":"paperclip-create-<uuid>"}`, `{"a":"paperclip-create-0b0e8d43-7c2c-4a6e-9d3b-4a8e2f1c0d9e"}`, ""},
		{"inline text is literal", `{"a":"x.<uuid>"}`, `{"a":"xy0b0e8d43-7c2c-4a6e-9d3b-4a8e2f1c0d9e"}`, "want"},
		{"number placeholder", `{"d":"<number>"}`, `{"d":12.5}`, ""},
		{"int placeholder rejects fractions", `{"d":"<int>"}`, `{"d":12.5}`, "want <int>"},
		{"iso8601", `{"t":"<iso8601>"}`, `{"t":"2026-11-29T10:00:00.123Z"}`, ""},
		{"regexp", `{"m":"<re:Command timed out after [0-9]+ s\\.>"}`, `{"m":"Command timed out after 3 s."}`, ""},
		{"variables", `{"u":"${URL}","n":"${N}","s":"at ${URL}/x"}`, `{"u":"http://127.0.0.1:9/api","n":7,"s":"at http://127.0.0.1:9/api/x"}`, ""},
		{"array length", `[1,2]`, `[1,2,3]`, "want 2 elements"},
		{"null vs missing", `{"a":null}`, `{}`, `missing key "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Match([]byte(tt.expected), []byte(tt.actual), vars)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
			}
		})
	}
}

func TestCaptureFeedsLaterSubstitution(t *testing.T) {
	t.Parallel()
	captured, err := Match([]byte(`{"result":{"providerLeaseId":"<capture:LEASE>"}}`), []byte(`{"result":{"providerLeaseId":"sbx-1"}}`), Vars{})
	require.NoError(t, err)
	out, err := Substitute([]byte(`{"params":{"providerLeaseId":"${LEASE}","note":"lease ${LEASE}"}}`), captured)
	require.NoError(t, err)
	assert.JSONEq(t, `{"params":{"providerLeaseId":"sbx-1","note":"lease sbx-1"}}`, string(out))
	_, err = Substitute([]byte(`"${NOPE}"`), captured)
	assert.ErrorContains(t, err, "NOPE")
}

func TestSubstitute(t *testing.T) {
	t.Parallel()
	vars := Vars{"URL": StringVar("http://h/api"), "Q": StringVar(`a"b`), "CFG": json.RawMessage(`{"k":1}`)}
	got, err := Substitute([]byte(`{"config":"${CFG}","u":"${URL}/x","q":"${Q}","inner":"cfg=${CFG}"}`), vars)
	require.NoError(t, err)
	assert.JSONEq(t, `{"config":{"k":1},"u":"http://h/api/x","q":"a\"b","inner":"cfg={\"k\":1}"}`, string(got))
	_, err = Substitute([]byte(`"${NOPE}"`), vars)
	assert.ErrorContains(t, err, "NOPE")
	path, err := SubstituteText(`${Q}/d "x"`, vars)
	require.NoError(t, err)
	assert.Equal(t, `a"b/d "x"`, path)
}

func TestGeneralizeKeepsPlaceholdersAndHidesVolatileValues(t *testing.T) {
	t.Parallel()
	vars := Vars{"DAYTONA_API_URL": StringVar("http://127.0.0.1:4242/api")}
	actual := `{"jsonrpc":"2.0","id":3,"result":{"sandboxId":"0b0e8d43-7c2c-4a6e-9d3b-4a8e2f1c0d9e","name":"paperclip-create-0b0e8d43-7c2c-4a6e-9d3b-4a8e2f1c0d9e","at":"2026-11-29T10:00:00Z","url":"http://127.0.0.1:4242/api","metadata":{"durationMs":41,"exitCode":0},"token":"abc"}}`
	old := `{"jsonrpc":"2.0","id":3,"result":{"token":"<string>"}}`
	g, err := Generalize([]byte(actual), []byte(old), vars)
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"result":{"at":"<iso8601>","metadata":{"durationMs":"<number>","exitCode":0},"name":"paperclip-create-<uuid>","sandboxId":"<uuid>","token":"<string>","url":"${DAYTONA_API_URL}"}}`, string(g))
	_, err = Match(g, []byte(actual), vars)
	assert.NoError(t, err, "a generalized expectation matches what it came from")
}

func TestRedact(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"params": map[string]any{
			"config":        map[string]any{"apiKey": "k", "image": "img"},
			"secretHeaders": []any{map[string]any{"name": "X-Daytona-Preview-Token", "value": "v"}},
			"token":         "t",
			"count":         3,
		},
	}
	out, err := EncodeOrdered(Redact(in))
	require.NoError(t, err)
	assert.Equal(t, `{"params":{"config":{"apiKey":"<redacted>","image":"img"},"count":3,"secretHeaders":[{"name":"X-Daytona-Preview-Token","value":"<redacted>"}],"token":"<redacted>"}}`, string(out))

	// An interactive setup's payload is marked sensitive: its command holds
	// the SSH token too.
	payload := map[string]any{"result": map[string]any{
		"connectionSummary": map[string]any{"type": "ssh", "commandRedacted": true, "expiresAt": "2030-01-01T00:00:00.000Z"},
		"connectionPayload": map[string]any{"type": "ssh", "command": "ssh tok@ssh.app.daytona.io", "token": "tok",
			"expiresAt": "2030-01-01T00:00:00.000Z", "metadata": map[string]any{"provider": "daytona", "sensitive": true}},
	}}
	out, err = EncodeOrdered(Redact(payload))
	require.NoError(t, err)
	assert.Equal(t, `{"result":{"connectionPayload":{"command":"<redacted>","expiresAt":"<redacted>","metadata":{"provider":"daytona","sensitive":true},"token":"<redacted>","type":"ssh"},"connectionSummary":{"commandRedacted":true,"expiresAt":"2030-01-01T00:00:00.000Z","type":"ssh"}}}`, string(out))
}

func TestParseAndWriteRoundTrip(t *testing.T) {
	t.Parallel()
	src := "# comment\n\nhost {\"jsonrpc\":\"2.0\",\"id\":1,\n    \"method\":\"health\"}\n  timeout_ms 5\nworker {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}\n" +
		"unordered [\n  {\"a\":1},\n  {\"b\":2}]\nhook state LEASE stopped\nexit 0\n"
	steps, err := Parse(strings.NewReader(src))
	require.NoError(t, err)
	require.Len(t, steps, 7)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"method":"health"}`, string(steps[2].Host))
	assert.Equal(t, 5, steps[2].TimeoutMs)
	assert.Equal(t, 6, steps[3].Line)
	assert.Len(t, steps[4].Unordered, 2)
	assert.Equal(t, "state LEASE stopped", steps[5].Hook)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, steps))
	assert.Equal(t, src, buf.String())

	// A step written anew reads back as itself.
	fresh := []Step{{Unordered: steps[4].Unordered}, {HostRaw: new(string), Replies: 2, Differs: map[string][]string{"r": {"$"}}}}
	*fresh[1].HostRaw = "not json\t"
	buf.Reset()
	require.NoError(t, Write(&buf, fresh))
	back, err := Parse(&buf)
	require.NoError(t, err)
	assert.Len(t, back[0].Unordered, 2)
	assert.Equal(t, "not json\t", *back[1].HostRaw)
	assert.Equal(t, 2, back[1].Replies)

	for text, want := range map[string]string{
		"hots {}":                            `line 1: unknown step "hots"`,
		"worker {":                           "line 1: worker",
		"  {}":                               "continues a step",
		"sleep_ms 5\n  capture {}":           "takes no options",
		"host {}\n  differs {\"r\":[\"x\"]}": "must start with $",
		"host {}\n  replies 2":               "replies is for host_raw",
		"close_stdin now":                    "takes no value",
		"exit 0\nscenario {}":                "must come first",
		"scenario {\"emulator\":{\"x\":1}}":  "unknown field",
	} {
		_, err := Parse(strings.NewReader(text))
		assert.ErrorContains(t, err, want, text)
	}
}

// A recording holds no secret, whatever the host sends: a line that does
// not parse is not written (only its size), a key seen once under a secret
// name is redacted wherever it appears again (an error that echoes it, an
// argument), the environment's key too, and URLs lose their user info,
// query values and fragment (config.apiUrl and the normalizedConfig the
// worker echoes).
// A host message written over several lines is sent as one line; one on a
// single line keeps its bytes (a transcript may test the worker's framing).
func TestHostValueOverSeveralLinesIsOneLine(t *testing.T) {
	steps, err := Parse(strings.NewReader("host {\"jsonrpc\":\"2.0\",\"id\":1,\n  \"method\":\"health\"}\nhost {\"id\": 2}\n"))
	require.NoError(t, err)
	require.Len(t, steps, 2)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"method":"health"}`, string(steps[0].Host))
	assert.Equal(t, `{"id": 2}`, string(steps[1].Host))
}

func TestRecordingHoldsNoSecret(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rec.scenario")
	rec, err := OpenRecorder(path)
	require.NoError(t, err)
	const (
		key    = "dtn_live_key_0123456789"
		envKey = "dtn_env_key_9876543210"
	)
	rec.AddSecret(envKey)
	lines := []struct {
		fromHost bool
		line     string
	}{
		{true, `{"jsonrpc":"2.0","id":1,"method":"environmentAcquireLease","params":{"config":{"apiKey":"` + key + `"` /* cut short */},
		{true, `{"jsonrpc":"2.0","id":2,"method":"environmentValidateConfig","params":{"config":{"apiKey":"` + key + `","apiUrl":"https://user:pa55word@daytona.example/api?token=t0ken-value&x=1#frag-secret"}}}`},
		{false, `{"jsonrpc":"2.0","id":2,"result":{"ok":true,"normalizedConfig":{"apiKey":"` + key + `","apiUrl":"https://user:pa55word@daytona.example/api?token=t0ken-value&x=1#frag-secret"}}}`},
		{false, `{"jsonrpc":"2.0","id":3,"error":{"code":-32002,"message":"the server said: bad key ` + key + `"}}`},
		{true, `{"jsonrpc":"2.0","id":4,"method":"environmentExecute","params":{"command":"curl","args":["-H","Authorization: Bearer ` + envKey + `","see http://u:p@h/x?sig=abc"]}}`},
		// Terminals: what is typed and shown has no secret-looking name.
		{true, `{"jsonrpc":"2.0","id":7,"method":"environmentExecute","params":{"command":"true","env":{"SSH_PRIVATE_KEY":"-----BEGIN KEY-----abc","DB_PASSWD":"hunter2-pw","SESSION_COOKIE":"c00kie-val"}}}`},
		{true, `{"jsonrpc":"2.0","id":5,"method":"loginPtyInput","params":{"workerSessionId":"w","data":"4/0AVMBsJSECRETCODE\r"}}`},
		{false, `{"jsonrpc":"2.0","method":"loginPty.output","params":{"hostRouteId":"r","workerSessionId":"w","chunk":"Your OAuth token:\r\nsk-ant-oat01-SECRETSECRET\r\n"}}`},
		{true, `{"jsonrpc":"2.0","id":6,"method":"duplexChannelWrite","params":{"hostRouteId":"r","workerSessionId":"w","data":"c2VjcmV0LXN0ZGlu"}}`},
		{false, `{"jsonrpc":"2.0","method":"duplexChannel.data","params":{"hostRouteId":"r","workerSessionId":"w","chunk":"c2VjcmV0LXN0ZG91dA=="}}`},
	}
	for _, l := range lines {
		rec.Record(l.fromHost, []byte(l.line))
	}
	require.NoError(t, rec.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	out := string(data)
	for _, secret := range []string{key, envKey, "pa55word", "user:", "t0ken-value", "frag-secret", "sig=abc", "u:p@",
		"SECRETCODE", "SECRETSECRET", "c2VjcmV0LXN0ZGlu", "c2VjcmV0LXN0ZG91dA==", "BEGIN KEY", "hunter2-pw", "c00kie-val"} {
		assert.NotContains(t, out, secret)
	}
	assert.Contains(t, out, `host_raw "<redacted: 113 bytes that are not JSON>"`)
	assert.Contains(t, out, `https://<redacted>@daytona.example/api?token=<redacted>&x=<redacted>#<redacted>`)
	assert.Contains(t, out, `"message":"the server said: bad key <redacted>"`)
	steps, err := Parse(strings.NewReader(out))
	require.NoError(t, err, "the recording is a transcript")
	assert.Len(t, steps, len(lines))
}

func TestRedactURLs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://127.0.0.1:3000/api":                 "http://127.0.0.1:3000/api",
		"wss://h/x?token=a&b=c":                     "wss://h/x?token=<redacted>&b=<redacted>",
		"see https://a:b@h:1/p#f and ftp://x@y/z?q": "see https://<redacted>@h:1/p#<redacted> and ftp://<redacted>@y/z?<redacted>",
		`"http://h/?k=v", then`:                     `"http://h/?k=<redacted>", then`,
		"no url here":                               "no url here",
	} {
		assert.Equal(t, want, RedactURLs(in), in)
	}
}
