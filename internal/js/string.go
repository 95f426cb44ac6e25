package js

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
)

// String is JavaScript's String(v) of a decoded value, which is also what a
// template literal writes for it: an array joins its elements with commas
// (null as ""), an object is "[object Object]".
func String(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return v
	case json.Number:
		return FormatNumber(Number(v))
	case float64:
		return FormatNumber(v)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			if x != nil {
				parts[i] = String(x)
			}
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

// StringJSON is String of one JSON value, where absent (empty) is
// undefined; "" when raw is not JSON.
func StringJSON(raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "undefined"
	}
	v, ok := Decode(raw)
	if !ok {
		return ""
	}
	return String(v)
}

// Length is s.length: the UTF-16 code units of s.
func Length(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// ToLower is String.prototype.toLowerCase as far as ASCII can tell: of the
// ways it differs from strings.ToLower, the one whose result can reach ASCII
// is U+0130, which lowers to "i" and a combining dot, not to a bare "i". The
// others (a final sigma) are left as Go maps them.
func ToLower(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307"))
}
