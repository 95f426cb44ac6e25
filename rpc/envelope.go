package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/paperclipai/daytona-worker/protocol"
)

// messageKind is what a line from the host turned out to be.
type messageKind int

const (
	kindRequest messageKind = iota + 1
	kindResponse
	kindNotification
	kindInvalid
)

// message is one classified line from the host. Raw members alias a fresh
// copy made by the decoder, never the reader's buffer.
type message struct {
	kind       messageKind
	id         json.RawMessage // requests and responses: the id exactly as sent
	method     string
	params     json.RawMessage // nil when absent
	result     json.RawMessage // responses
	errObj     json.RawMessage // responses
	invocation *protocol.Invocation
	invalid    string // kindInvalid: why
}

// errNotObject and friends are the parse errors of the SDK's parseMessage.
var errNotObject = errors.New("Message must be a JSON object")

// parseMessage decodes and classifies one trimmed, non-empty line the way the
// official worker runtime does. A returned error is a parse error to answer
// with -32700. It never includes the line's content: a malformed line may
// carry secrets, and the reply goes back to the host, which logs it.
func parseMessage(line []byte) (*message, error) {
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

func isJSONString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '"'
}

func isJSONNull(raw json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// describeVersion renders the "jsonrpc" member like JSON.stringify would,
// except that strings which do not look like a version are not echoed: the
// reply goes to the host's logs, and a garbled line may hold a secret.
func describeVersion(v json.RawMessage, present bool) string {
	if !present {
		return "undefined"
	}
	var compact bytes.Buffer
	if json.Compact(&compact, v) != nil {
		return "an invalid value"
	}
	s := compact.String()
	switch {
	case looksLikeVersion(s):
		return s
	case strings.HasPrefix(s, `"`):
		return "a string"
	case strings.HasPrefix(s, "{"):
		return "an object"
	case strings.HasPrefix(s, "["):
		return "an array"
	}
	return "a number"
}

// looksLikeVersion reports whether a compact JSON value is short enough and
// plain enough to echo: true, false, null, a string of up to 8 digits and
// dots, or such a number (a hand-written check, not a regexp compiled at
// every start).
func looksLikeVersion(s string) bool {
	switch s {
	case "true", "false", "null":
		return true
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
		return len(s) <= 8 && digitsAndDots(s)
	}
	s = strings.TrimPrefix(s, "-")
	return len(s) >= 1 && len(s) <= 8 && digitsAndDots(s)
}

func digitsAndDots(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func describeSyntaxError(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return syn.Error() + " at byte offset " + strconv.FormatInt(syn.Offset, 10)
	}
	return err.Error()
}
