package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
)

// parseMessageReference is parseMessage as it was before splitEnvelope: the
// line decoded into a map of raw members by json.Unmarshal. The tests below
// hold the single-pass parser to it.
func parseMessageReference(line []byte) (*message, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			if line[0] == '[' {
				// An array is an object to JavaScript: it fails the
				// version check, its "jsonrpc" member being undefined.
				return nil, fmt.Errorf(`Invalid or missing jsonrpc version (expected "2.0", got undefined)`)
			}
			return nil, errNotObject
		}
		return nil, fmt.Errorf("Invalid JSON: %s", describeSyntaxError(err))
	}
	if obj == nil { // the line was `null`
		return nil, errNotObject
	}
	if v, ok := obj["jsonrpc"]; !ok || !bytes.Equal(bytes.TrimSpace(v), []byte(`"2.0"`)) {
		return nil, fmt.Errorf(`Invalid or missing jsonrpc version (expected "2.0", got %s)`, describeVersion(v, ok))
	}

	m := &message{}
	id, hasID := obj["id"]
	result, hasResult := obj["result"]
	errObj, hasError := obj["error"]
	rawMethod, hasMethod := obj["method"]
	var method string
	methodIsString := hasMethod && isJSONString(rawMethod) && json.Unmarshal(rawMethod, &method) == nil

	switch {
	case hasID && (hasResult || hasError):
		m.kind = kindResponse
		m.id, m.result, m.errObj = id, result, errObj
	case methodIsString && hasID && !isJSONNull(id):
		m.kind = kindRequest
		m.id, m.method = id, method
	case methodIsString && !hasID:
		m.kind = kindNotification
		m.method = method
	default:
		m.kind = kindInvalid
		switch {
		case hasMethod && !methodIsString:
			m.invalid = "method must be a string"
		case hasMethod:
			m.invalid = "a request id must not be null"
		default:
			m.invalid = "the message is neither a request, a response nor a notification"
		}
		return m, nil
	}
	if p, ok := obj["params"]; ok {
		m.params = p
	}
	if raw, ok := obj["paperclipInvocation"]; ok {
		var inv protocol.Invocation
		// A malformed invocation is ignored rather than fatal: the host only
		// uses it to scope and trace, and the Node runtime does not check it.
		if json.Unmarshal(raw, &inv) == nil && inv.ID != "" {
			m.invocation = &inv
		}
	}
	return m, nil
}

var splitSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"environmentExecute","params":{"a":[1,{"b":"}]\"{"}],"c":"\\"},"paperclipInvocation":{"id":"inv-1"}}`,
	` { "jsonrpc" : "2.0" , "id" : 1 , "method" : "health" } `,
	"{\"jsonrpc\":\"2.0\",\r\n\t\"id\":1,\"method\":\"health\",\"params\":null}",
	`{"jsonrpc":"2.0","id":1,"method":"health","id":2}`,
	`{"jsonrpc":"2.0","id":1,"method":"health","method":7}`,
	`{"jsonrpc":"2.0","\u0069d":1,"method":"h\u00e9alth"}`,
	`{"jsonrpc":"2.0","id":1,"me\"thod":"x","method":"y\\"}`,
	`{"jsonrpc":"2.0","id":"\\\\","method":"x\\\\\\"y"}`,
	`{"jsonrpc":"2.0","id":1,"method":"health","params":[[[]],{}],"result":true}`,
	`{"jsonrpc":"2.0","id":-1.5e3,"result":false,"error":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"` + "\xff\xfe" + `"}`,
	`{"` + "\xff" + `":1,"jsonrpc":"2.0","method":"x"}`,
	`{}`, `{"jsonrpc":"2.0"}`, `{"jsonrpc" :"2.0" ,"id":null,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","paperclipInvocation":{"id":""}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","paperclipInvocation":{"id":7}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x"} x`, `{"jsonrpc":"2.0",}`, `{"a":1}{"b":2}`,
	`{"jsonrpc":2.0e0}`, `{"jsonrpc":"2.00"}`, `{"jsonrpc":["2.0"]}`,
}

func TestParseMessageAgreesWithTheMapDecoder(t *testing.T) {
	t.Parallel()
	for _, s := range append(splitSeeds, fuzzSeeds...) {
		requireSameParse(t, []byte(s))
	}
}

// FuzzParseMessageAgreesWithTheMapDecoder checks that the single-pass parser
// classifies, splits and rejects every line exactly as the map decoder did.
func FuzzParseMessageAgreesWithTheMapDecoder(f *testing.F) {
	for _, s := range append(splitSeeds, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		requireSameParse(t, line)
	})
}

func requireSameParse(t *testing.T, line []byte) {
	t.Helper()
	if len(line) == 0 {
		return // the stream never parses an empty line
	}
	want, wantErr := parseMessageReference(bytes.Clone(line))
	got, gotErr := parseMessage(line)
	if wantErr != nil {
		require.EqualError(t, gotErr, wantErr.Error(), "%q", line)
		require.Nil(t, got)
		return
	}
	require.NoError(t, gotErr, "%q", line)
	assert.Equal(t, describeMessage(want), describeMessage(got), "%q", line)
}

// describeMessage renders every field of m, nil and empty apart.
func describeMessage(m *message) string {
	raw := func(b json.RawMessage) string {
		if b == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%q", b)
	}
	inv := "<nil>"
	if m.invocation != nil {
		inv = fmt.Sprintf("%+v", *m.invocation)
	}
	return fmt.Sprintf("kind=%d id=%s method=%q params=%s result=%s error=%s invocation=%s invalid=%q",
		m.kind, raw(m.id), m.method, raw(m.params), raw(m.result), raw(m.errObj), inv, m.invalid)
}

// The members must not alias the line: the reader reuses its buffer.
func TestParseMessageCopiesTheLine(t *testing.T) {
	t.Parallel()
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"health","params":{"a":1}}`)
	m, err := parseMessage(line)
	require.NoError(t, err)
	for i := range line {
		line[i] = 'x'
	}
	assert.Equal(t, `1`, string(m.id))
	assert.Equal(t, `{"a":1}`, string(m.params))
}
