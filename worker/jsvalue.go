package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/jsquote"
)

// The Node plugin parses config with JavaScript's coercions (Number(x),
// typeof checks, === true). These helpers reproduce them on decoded JSON
// values so that every config the host has ever stored parses the same way.

// jsNumber is JavaScript's Number(v) for a JSON value decoded with UseNumber.
func jsNumber(v any) float64 {
	switch v := v.(type) {
	case nil:
		return 0
	case bool:
		if v {
			return 1
		}
		return 0
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			// Out of float64 range: JavaScript yields ±Infinity.
			if strings.HasPrefix(string(v), "-") {
				return math.Inf(-1)
			}
			return math.Inf(1)
		}
		return f
	case float64:
		return v
	case string:
		return jsStringToNumber(v)
	case []any:
		// Number([]) is 0, Number([x]) is Number(String(x)), longer arrays NaN.
		switch len(v) {
		case 0:
			return 0
		case 1:
			return jsStringToNumber(jsString(v[0]))
		}
		return math.NaN()
	}
	return math.NaN()
}

// jsString is String(v) for the values jsNumber needs it for.
func jsString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return jsNumberString(jsNumber(v))
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = jsString(x)
		}
		return strings.Join(parts, ",")
	}
	return "[object Object]"
}

// jsStringToNumber follows the StringToNumber abstract operation.
func jsStringToNumber(s string) float64 {
	s = strings.TrimFunc(s, isJSWhitespace)
	if s == "" {
		return 0
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			return jsRadixToNumber(s[2:], base)
		}
	}
	if !isDecimalLiteral(s) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var numErr *strconv.NumError
		if ok := asNumError(err, &numErr); ok && numErr.Err == strconv.ErrRange {
			return f // ±Inf or 0, as JavaScript rounds
		}
		return math.NaN()
	}
	return f
}

// jsRadixToNumber converts the digits of a 0x, 0o or 0b literal. JavaScript
// takes any number of digits and rounds the integer to the nearest double
// (ties to even; Infinity past the largest), where a 64-bit parse overflows.
func jsRadixToNumber(digits string, base int) float64 {
	n, err := strconv.ParseUint(digits, base, 64)
	if err == nil {
		return float64(n) // rounds to nearest even, as JavaScript does
	}
	if !errors.Is(err, strconv.ErrRange) {
		return math.NaN() // also a sign or '_', which ParseUint rejects
	}
	// ParseUint stops at the overflow: the rest is still to be checked.
	// digits starts with a digit, so SetString sees no sign.
	x, ok := new(big.Int).SetString(digits, base)
	if !ok {
		return math.NaN()
	}
	f, _ := new(big.Float).SetInt(x).Float64() // exact, then rounded once
	return f
}

func asNumError(err error, target **strconv.NumError) bool {
	ne, ok := err.(*strconv.NumError)
	if ok {
		*target = ne
	}
	return ok
}

// isDecimalLiteral accepts StrDecimalLiteral: [+-] digits [. digits] [e[+-]digits],
// with either side of the dot optional but not both.
func isDecimalLiteral(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

func isJSWhitespace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func isFinite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

// jsTrunc is Math.trunc, keeping -0 out of the output.
func jsTrunc(f float64) float64 {
	t := math.Trunc(f)
	if t == 0 {
		return 0
	}
	return t
}

// jsNumberString renders a number the way JSON.stringify / String() do.
func jsNumberString(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "null" // JSON.stringify's rendering; callers only pass finite values
	case f == 0:
		return "0"
	}
	abs := math.Abs(f)
	if abs >= 1e21 || abs < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes e+21 / e-07; JavaScript writes e+21 / e-7.
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		exp = strings.TrimLeft(exp[1:], "0")
		return mant + "e" + string(sign) + exp
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// jsTrimmedString is the plugin's parseOptionalString: a non-blank string,
// trimmed, or absent.
func jsTrimmedString(v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		return "", false
	}
	s = strings.TrimFunc(s, isJSWhitespace)
	return s, s != ""
}

// jsObject is a decoded JSON object with JavaScript's member order: the
// members whose names are array indices first, ascending, then the others
// in the order they were first given (a repeated member keeps its first
// place and takes its last value), as JSON.parse builds it.
type jsObject struct {
	keys []string
	vals map[string]any
}

// decodeJS decodes raw JSON (numbers as json.Number, objects as *jsObject)
// for re-encoding as JavaScript would. Absent input is (nil, false).
func decodeJS(raw json.RawMessage) (any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSValue(dec)
	if err != nil {
		return nil, false
	}
	return v, true
}

func decodeJSValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			list := []any{}
			for dec.More() {
				v, err := decodeJSValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		obj := &jsObject{vals: map[string]any{}}
		var indices []string
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeJSValue(dec)
			if err != nil {
				return nil, err
			}
			if _, seen := obj.vals[k]; !seen {
				if isArrayIndex(k) {
					indices = append(indices, k)
				} else {
					obj.keys = append(obj.keys, k)
				}
			}
			obj.vals[k] = v
		}
		sort.Slice(indices, func(i, j int) bool {
			if len(indices[i]) != len(indices[j]) {
				return len(indices[i]) < len(indices[j])
			}
			return indices[i] < indices[j]
		})
		obj.keys = append(indices, obj.keys...)
		_, err := dec.Token()
		return obj, err
	}
	return tok, nil
}

// isArrayIndex reports a canonical array index ("0", "17"; not "01"), the
// member names JavaScript orders first.
func isArrayIndex(k string) bool {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return false
	}
	for _, c := range k {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return err == nil && n < 1<<32-1
}

// jsTruthyValue is JavaScript's truthiness of a decoded value.
func jsTruthyValue(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		f := jsNumber(v)
		return f != 0 && !math.IsNaN(f)
	}
	return true
}

// writeJSIndented writes v as JSON.stringify(v, null, 2) writes it, at the
// given depth.
func writeJSIndented(b *bytes.Buffer, v any, depth int) {
	pad := func(d int) string { return strings.Repeat("  ", d) }
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		n := jsNumber(v)
		if isFinite(n) {
			b.WriteString(jsNumberString(n))
		} else {
			b.WriteString("null")
		}
	case string:
		b.WriteString(jsquote.String(v))
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i, x := range v {
			b.WriteString(pad(depth + 1))
			writeJSIndented(b, x, depth+1)
			if i < len(v)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(pad(depth) + "]")
	case *jsObject:
		if len(v.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, k := range v.keys {
			b.WriteString(pad(depth+1) + jsquote.String(k) + ": ")
			writeJSIndented(b, v.vals[k], depth+1)
			if i < len(v.keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(pad(depth) + "}")
	}
}

// jsJSON is JSON.stringify(v) of a value decodeJS returned: members in
// JavaScript's order, numbers as JavaScript writes them.
type jsJSON struct{ v any }

func (j jsJSON) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	writeJSIndented(&b, j.v, 0)
	var out bytes.Buffer
	if err := json.Compact(&out, b.Bytes()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
