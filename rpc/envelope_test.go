package rpc

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMessageClassifiesLikeTheSDK(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		line     string
		kind     messageKind
		id       string
		method   string
		params   string
		inv      string
		parseErr string
	}{
		{name: "request with number id", line: `{"jsonrpc":"2.0","id":7,"method":"health","params":{}}`, kind: kindRequest, id: `7`, method: "health", params: `{}`},
		{name: "request with string id", line: `{"jsonrpc":"2.0","id":"a-1","method":"health"}`, kind: kindRequest, id: `"a-1"`, method: "health"},
		{name: "request with fractional id", line: `{"jsonrpc":"2.0","id":1.5,"method":"health"}`, kind: kindRequest, id: `1.5`, method: "health"},
		{name: "request with negative id", line: `{"jsonrpc":"2.0","id":-3,"method":"health"}`, kind: kindRequest, id: `-3`, method: "health"},
		{name: "request with huge id", line: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"health"}`, kind: kindRequest, id: `123456789012345678901234567890`, method: "health"},
		{name: "request with invocation", line: `{"jsonrpc":"2.0","id":1,"method":"environmentExecute","params":{"a":1},"paperclipInvocation":{"id":"inv-1","scope":{"companyId":"c"},"traceparent":"00-x"}}`, kind: kindRequest, id: `1`, method: "environmentExecute", params: `{"a":1}`, inv: "inv-1"},
		{name: "malformed invocation is ignored", line: `{"jsonrpc":"2.0","id":1,"method":"health","paperclipInvocation":"nope"}`, kind: kindRequest, id: `1`, method: "health"},
		{name: "notification", line: `{"jsonrpc":"2.0","method":"onEvent","params":{}}`, kind: kindNotification, method: "onEvent", params: `{}`},
		{name: "success response", line: `{"jsonrpc":"2.0","id":3,"result":null}`, kind: kindResponse, id: `3`},
		{name: "error response", line: `{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"x"}}`, kind: kindResponse, id: `3`},
		{name: "response wins over request", line: `{"jsonrpc":"2.0","id":3,"method":"health","result":1}`, kind: kindResponse, id: `3`},
		{name: "null id request is invalid", line: `{"jsonrpc":"2.0","id":null,"method":"health"}`, kind: kindInvalid},
		{name: "non-string method is invalid", line: `{"jsonrpc":"2.0","id":1,"method":5}`, kind: kindInvalid},
		{name: "id only is invalid", line: `{"jsonrpc":"2.0","id":2}`, kind: kindInvalid},
		{name: "upper-case keys are not members", line: `{"jsonrpc":"2.0","ID":1,"Method":"health"}`, kind: kindInvalid},
		{name: "not json", line: `not json`, parseErr: "Invalid JSON: invalid character 'o' in literal null (expecting 'u') at byte offset 2"},
		{name: "truncated", line: `{"jsonrpc":"2.0","id":1`, parseErr: "Invalid JSON: unexpected end of JSON input at byte offset 23"},
		{name: "array (batch)", line: `[{"jsonrpc":"2.0","id":1,"method":"health"}]`, parseErr: `Invalid or missing jsonrpc version (expected "2.0", got undefined)`}, // an array is an object to JavaScript
		{name: "null", line: `null`, parseErr: "Message must be a JSON object"},
		{name: "string", line: `"hello"`, parseErr: "Message must be a JSON object"},
		{name: "missing version", line: `{"id":1,"method":"health"}`, parseErr: `Invalid or missing jsonrpc version (expected "2.0", got undefined)`},
		{name: "wrong version", line: `{"jsonrpc":"1.0","id":1,"method":"health"}`, parseErr: `Invalid or missing jsonrpc version (expected "2.0", got "1.0")`},
		{name: "numeric version", line: `{"jsonrpc":2,"id":1,"method":"health"}`, parseErr: `Invalid or missing jsonrpc version (expected "2.0", got 2)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := parseMessage([]byte(tt.line))
			if tt.parseErr != "" {
				require.EqualError(t, err, tt.parseErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.kind, m.kind)
			assert.Equal(t, tt.id, string(m.id))
			assert.Equal(t, tt.method, m.method)
			assert.Equal(t, tt.params, string(m.params))
			if tt.inv == "" {
				assert.Nil(t, m.invocation)
			} else {
				require.NotNil(t, m.invocation)
				assert.Equal(t, tt.inv, m.invocation.ID)
			}
		})
	}
}

func TestParseErrorsNeverEchoTheLine(t *testing.T) {
	t.Parallel()
	secret := "dtn_live_SECRET_KEY_0123456789"
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"apiKey":"` + secret + `"`,
		`{"jsonrpc":"` + secret + `","id":1}`,
		secret,
	} {
		_, err := parseMessage([]byte(line))
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secret)
		assert.False(t, strings.Contains(err.Error(), "SECRET"))
	}
}

// looksLikeVersion agrees with the pattern it replaces.
func TestLooksLikeVersionAgreesWithItsPattern(t *testing.T) {
	t.Parallel()
	pattern := regexp.MustCompile(`^(?:"[0-9.]{0,8}"|-?[0-9.]{1,8}|true|false|null)$`)
	inputs := []string{"", `""`, `"`, `"2.0"`, `"2.0.0.0.0"`, `"123456789"`, `"12345678"`, `"a"`, `"2.0`, `2.0"`,
		"2", "-2", "-", "--2", "2.0", "12345678", "123456789", "-12345678", "1e5", "true", "false", "null", "True",
		"nul", "{}", "[]", `"-1"`, ".", "...", "-.", `"."`, "truex", " 2"}
	for _, s := range inputs {
		assert.Equal(t, pattern.MatchString(s), looksLikeVersion(s), "%q", s)
	}
}
