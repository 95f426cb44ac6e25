package js

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object is an object as JSON.parse builds it. Its members are in
// JavaScript's order: those whose names are array indices first, ascending,
// then the others in the order they were first set; setting a member again
// keeps its place and replaces its value.
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{vals: map[string]any{}} }

// Set sets member k to v.
func (o *Object) Set(k string, v any) {
	if _, seen := o.vals[k]; !seen {
		if IsArrayIndex(k) {
			// After the indices below k, before every other name.
			i, _ := slices.BinarySearchFunc(o.keys, k, func(key, k string) int {
				if !IsArrayIndex(key) {
					return 1
				}
				return compareIndices(key, k)
			})
			o.keys = slices.Insert(o.keys, i, k)
		} else {
			o.keys = append(o.keys, k)
		}
	}
	o.vals[k] = v
}

// Get returns member k and whether the object has it.
func (o *Object) Get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// Keys is Object.keys: the member names in order. The slice must not be
// modified.
func (o *Object) Keys() []string { return o.keys }

// IsArrayIndex reports whether k is an array index: a canonical integer
// ("0", "17"; not "01") below 2^32-1, the names an object lists first.
func IsArrayIndex(k string) bool {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < '0' || k[i] > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(k, 10, 64)
	return err == nil && n < 1<<32-1
}

// compareIndices orders two array indices by their value: canonical
// integers compare by length first.
func compareIndices(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// Decode is JSON.parse of one JSON value at the start of raw (what follows
// it is not read), as nil, bool, string, json.Number, []any or *Object. It
// reports false for absent or invalid input.
func Decode(raw []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	return v, err == nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token()
		return list, err
	case json.Delim('{'):
		// The indices are sorted once at the end: inserting each in place
		// would cost quadratic time for an object listing them backwards.
		obj := NewObject()
		var indices []string
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			if _, seen := obj.vals[k]; !seen {
				if IsArrayIndex(k) {
					indices = append(indices, k)
				} else {
					obj.keys = append(obj.keys, k)
				}
			}
			obj.vals[k] = v
		}
		slices.SortFunc(indices, compareIndices)
		obj.keys = append(indices, obj.keys...)
		_, err := dec.Token()
		return obj, err
	}
	return tok, nil
}

// Restringify is JSON.stringify(JSON.parse(text)): no whitespace, numbers
// as JavaScript writes them (1.50 is 1.5, 1e2 is 100, one out of range is
// null), a repeated member collapsed and members in JavaScript's order. It
// reports false when text does not start with a JSON value, or when a second
// value follows the first.
func Restringify(text []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return "", false
	}
	if _, err := dec.Token(); err == nil {
		return "", false
	}
	return Stringify(v), true
}

// Stringify is JSON.stringify(v) of a decoded value.
func Stringify(v any) string {
	var b strings.Builder
	writeJSON(&b, v, "", "")
	return b.String()
}

// StringifyIndent is JSON.stringify(v, null, 2) of a decoded value.
func StringifyIndent(v any) string {
	var b strings.Builder
	writeJSON(&b, v, "\n", "  ")
	return b.String()
}

// writeJSON writes v after a line break followed by prefix, each nesting
// level adding indent (JSON.stringify's gap); compact when both are empty.
func writeJSON(b *strings.Builder, v any, prefix, indent string) {
	inner := prefix + indent
	colon := ":"
	if indent != "" {
		colon = ": "
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(NumberJSON(Number(v)))
	case float64:
		b.WriteString(NumberJSON(v))
	case string:
		WriteQuoted(b, v)
	case []any:
		if len(v) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(inner)
			writeJSON(b, x, inner, indent)
		}
		b.WriteString(prefix)
		b.WriteByte(']')
	case *Object:
		if len(v.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(inner)
			WriteQuoted(b, k)
			b.WriteString(colon)
			writeJSON(b, v.vals[k], inner, indent)
		}
		b.WriteString(prefix)
		b.WriteByte('}')
	default:
		b.WriteString("null")
	}
}

// Quote is s quoted as JSON.stringify quotes a string (see WriteQuoted).
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	WriteQuoted(&b, s)
	return b.String()
}

// WriteQuoted writes s to b quoted as JSON.stringify quotes it: `"`, `\`
// and control characters are escaped (\b \f \n \r \t, else \u00xx), nothing
// else (no HTML escaping; U+2028 and U+2029 stay as they are). An invalid
// UTF-8 byte is written as U+FFFD, as a JavaScript string decoded from such
// bytes holds it.
func WriteQuoted(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}
