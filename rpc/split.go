package rpc

import (
	"bytes"
	"encoding/json"

	"github.com/paperclipai/daytona-worker/internal/rawjson"
)

// envelope holds the raw members of a message line that the worker reads,
// each exactly as sent (no surrounding whitespace) in a copy of the line, or
// nil when the member is absent. A member sent twice keeps its last value,
// as json.Unmarshal into a map keeps it.
type envelope struct {
	jsonrpc, id, method, params, result, errObj, invocation json.RawMessage
}

// splitEnvelope fills env from line and reports whether line is a valid
// JSON object. It checks the line once and then only walks its top-level
// members: a handler decodes the params it needs itself, so nothing is
// decoded twice. The members alias one fresh copy of the line, never the
// reader's buffer.
func splitEnvelope(line []byte, env *envelope) bool {
	return rawjson.EachMember(bytes.Clone(line), func(name, value []byte) {
		if slot := env.member(name); slot != nil {
			*slot = value
		}
	})
}

// member returns where the member named by the JSON string name goes, or
// nil for a member the worker does not read.
func (env *envelope) member(name []byte) *json.RawMessage {
	key := name[1 : len(name)-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		// An escaped name ("\u0069d") names the member it decodes to.
		key = []byte(rawjson.String(name))
	}
	switch string(key) {
	case "jsonrpc":
		return &env.jsonrpc
	case "id":
		return &env.id
	case "method":
		return &env.method
	case "params":
		return &env.params
	case "result":
		return &env.result
	case "error":
		return &env.errObj
	case "paperclipInvocation":
		return &env.invocation
	}
	return nil
}
