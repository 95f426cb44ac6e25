package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/internal/rawjson"
	"github.com/paperclipai/daytona-worker/protocol"
)

// describeDecodeError turns a params decoding error into a sentence naming
// the offending member, without quoting its value.
func describeDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		// encoding/json names a member of an embedded struct with the
		// struct's Go name in front ("DriverBaseParams.companyId").
		field := strings.ReplaceAll(typeErr.Field, "DriverBaseParams.", "")
		if field == "" {
			return fmt.Errorf("params must be %s, not a JSON %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		}
		// An embedded struct's Go name is not a member of the JSON.
		field = strings.ReplaceAll(field, "DriverBaseParams.", "")
		return fmt.Errorf("params.%s must be %s, not a JSON %s", field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	return err
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "a value of another type"
	}
	return "of another type"
}

// The plugin reads its params as a JavaScript object, without checking
// types: a member read on an absent or null value throws (a TypeError the
// runtime answers with -32002), while many wrong types are read leniently
// (a non-number timeout falls back, a flag is truthy or not, a non-object
// member read through `?.` is undefined). The helpers below bring the
// host's params into the shape the handlers decode, doing what the plugin
// does with each member; what the plugin would throw on is answered with
// -32602 (see differences.txt, wrong-param-types).

// paramsObject decodes a driver method's params. The plugin reads their
// members at once: that throws when params is absent or null, while a
// string, a number or an array simply has none of the members it reads, so
// it reads as an empty object.
func paramsObject(method string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	switch jsonKindOf(trimmed) {
	case "", "null":
		return nil, protocol.InvalidParams(method, errors.New("params must be an object"))
	case "object":
	default:
		return map[string]json.RawMessage{}, nil
	}
	if obj, ok := rawjson.Object(trimmed); ok {
		return obj, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return nil, protocol.InvalidParams(method, describeDecodeError(err))
	}
	return obj, nil
}

// jsonKindOf names the JSON type of a raw value: "string", "number",
// "bool", "null", "object", "array" (or "" when absent).
func jsonKindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

var (
	jsonTrue  = json.RawMessage("true")
	jsonFalse = json.RawMessage("false")
	jsonNull  = json.RawMessage("null")
)

// truthyFlag replaces a member the plugin tests for truthiness with the
// boolean it tests as.
func truthyFlag(obj map[string]json.RawMessage, key string) {
	if v, ok := obj[key]; ok {
		if js.TruthyJSON(v) {
			obj[key] = jsonTrue
		} else {
			obj[key] = jsonFalse
		}
	}
}

// falsyAsNull replaces a falsy member (false, 0, "", null) with null: the
// plugin's `if (!x)` treats them all as absent.
func falsyAsNull(obj map[string]json.RawMessage, key string) {
	if v, ok := obj[key]; ok && !js.TruthyJSON(v) {
		obj[key] = jsonNull
	}
}

// onlyKind drops a member that is not of the JSON kind the plugin uses (it
// reads other kinds as absent: `typeof x === "number"`, `x?.member`).
func onlyKind(obj map[string]json.RawMessage, key string, kinds ...string) {
	v, ok := obj[key]
	if !ok {
		return
	}
	k := jsonKindOf(v)
	for _, want := range kinds {
		if k == want {
			return
		}
	}
	delete(obj, key)
}

// stringifyMember turns a non-string, non-null member into its JavaScript
// String() form: the plugin only uses it as a value (a cache key), where any
// type works.
func stringifyMember(obj map[string]json.RawMessage, key string) {
	v, ok := obj[key]
	if !ok {
		return
	}
	switch jsonKindOf(v) {
	case "string", "null":
		return
	}
	x, ok := js.Decode(v)
	if !ok {
		return
	}
	b, _ := json.Marshal(js.String(x))
	obj[key] = b
}

// nested applies fn to the object member key (when it is an object), and
// stores the result back.
func nested(obj map[string]json.RawMessage, key string, fn func(map[string]json.RawMessage)) {
	v, ok := obj[key]
	if !ok || jsonKindOf(v) != "object" {
		return
	}
	inner, ok := rawjson.Object(v)
	if !ok {
		return
	}
	fn(inner)
	b, err := rawjson.AppendObject(nil, inner)
	if err == nil {
		obj[key] = b
	}
}

// requireObject fails when a member the plugin reads members of is absent
// or null (its read throws); other non-objects read as empty objects.
func requireObject(method string, obj map[string]json.RawMessage, key string) error {
	switch jsonKindOf(obj[key]) {
	case "", "null":
		return protocol.InvalidParams(method, fmt.Errorf("params.%s must be an object", key))
	case "object":
		return nil
	}
	obj[key] = json.RawMessage("{}")
	return nil
}

// baseValueKeys are the members every driver method carries; the plugin
// only uses them as values (cache keys, labels).
var baseValueKeys = []string{"driverKey", "companyId", "environmentId"}

// decodeDriverParams decodes a driver method's params into v after prepare
// (which may rewrite members as the plugin reads them) has run.
func decodeDriverParams(method string, raw json.RawMessage, v any, prepare func(map[string]json.RawMessage) error) error {
	obj, err := paramsObject(method, raw)
	if err != nil {
		return err
	}
	if prepare != nil {
		if err := prepare(obj); err != nil {
			return err
		}
	}
	b, err := rawjson.AppendObject(nil, obj)
	if err != nil {
		return protocol.InvalidParams(method, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return protocol.InvalidParams(method, describeDecodeError(err))
	}
	return nil
}

// keyOnlyBase stringifies the base members of a method that uses them only
// in cache keys (never sends them to Daytona), and drops issueId, which
// such a method never reads.
func keyOnlyBase(obj map[string]json.RawMessage) {
	for _, k := range baseValueKeys {
		stringifyMember(obj, k)
	}
	delete(obj, "issueId")
}

// leaseIDValue reads a provider lease id the plugin uses as it was sent. A
// string (or null) is left alone and nil returned. Any other value (a
// number, a boolean, an object, an array) is what the plugin puts in its
// scope: the SDK looks it up by its String() (GET /sandbox/5 for 5), and
// its handle check (sandbox.id !== providerLeaseId) refuses every sandbox
// that lookup finds. The member is replaced by that String() form and the
// value is returned, decoded as JavaScript holds it, for the scope
// (scope.withIDValue) and for the receipts that echo it.
func leaseIDValue(obj map[string]json.RawMessage, key string) any {
	v, ok := obj[key]
	if !ok {
		return nil
	}
	switch jsonKindOf(v) {
	case "", "null", "string":
		return nil
	}
	x, ok := js.Decode(v)
	if !ok {
		return nil
	}
	b, err := json.Marshal(js.String(x))
	if err != nil {
		return nil
	}
	obj[key] = b
	return x
}

// leaseIDMember brings a provider lease id into the form the handlers
// decode, as the plugin reads it: a falsy one (0, false, "", null) means no
// lease (`if (!params.providerLeaseId)`), and any other value that is no
// string (a number, a boolean, an array, an object) is looked up by its
// String() form (the SDK's `encodeURIComponent(String(id))`, the messages'
// template literals) and kept in the plugin's scope as sent, where its
// handle check refuses every sandbox found. That value is returned (nil for
// a string or no lease) for scope.withIDValue, as leaseIDValue does.
func leaseIDMember(obj map[string]json.RawMessage, key string) any {
	falsyAsNull(obj, key)
	return leaseIDValue(obj, key)
}
