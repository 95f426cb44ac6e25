package js

import (
	"bytes"
	"encoding/json"
	"math"
)

// Truthy is JavaScript's Boolean(v) of a decoded value.
func Truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number, float64:
		f := Number(v)
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

// TruthyJSON is Truthy of one JSON value, read without decoding it; absent
// (empty) is undefined, which is falsy.
func TruthyJSON(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case 'n', 'f':
		return false
	case 't', '{', '[':
		return true
	case '"':
		return !bytes.Equal(raw, []byte(`""`))
	}
	return Truthy(json.Number(raw))
}
