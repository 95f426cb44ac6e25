package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/rawjson"
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
//
// A valid object (every line the host sends) is checked once and then split
// into its members without decoding them: the members the handlers read
// are decoded once, by the handlers. Anything else takes json.Unmarshal's
// path for its exact error.
func parseMessage(line []byte) (*message, error) {
	var obj envelope
	if !splitEnvelope(line, &obj) {
		return nil, parseError(line)
	}
	if v := obj.jsonrpc; v == nil || !bytes.Equal(v, []byte(`"2.0"`)) {
		return nil, fmt.Errorf(`Invalid or missing jsonrpc version (expected "2.0", got %s)`, describeVersion(v, v != nil))
	}

	m := &message{}
	id, hasID := obj.id, obj.id != nil
	hasResult, hasError := obj.result != nil, obj.errObj != nil
	hasMethod := obj.method != nil
	var method string
	methodIsString := hasMethod && isJSONString(obj.method)
	if methodIsString {
		method = rawjson.String(obj.method)
	}

	switch {
	case hasID && (hasResult || hasError):
		m.kind = kindResponse
		m.id, m.result, m.errObj = id, obj.result, obj.errObj
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
	m.params = obj.params
	if raw := obj.invocation; raw != nil {
		var inv protocol.Invocation
		// A malformed invocation is ignored rather than fatal: the host only
		// uses it to scope and trace, and the Node runtime does not check it.
		if json.Unmarshal(raw, &inv) == nil && inv.ID != "" {
			m.invocation = &inv
		}
	}
	return m, nil
}

// parseError is the parse error of a line that is not a valid JSON object,
// as json.Unmarshal into an object reports it.
func parseError(line []byte) error {
	var obj map[string]json.RawMessage
	err := json.Unmarshal(line, &obj)
	if err == nil { // the line was `null`
		return errNotObject
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if line[0] == '[' {
			// An array is an object to JavaScript: it fails the
			// version check, its "jsonrpc" member being undefined.
			return fmt.Errorf(`Invalid or missing jsonrpc version (expected "2.0", got undefined)`)
		}
		return errNotObject
	}
	return fmt.Errorf("Invalid JSON: %s", describeSyntaxError(err))
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
