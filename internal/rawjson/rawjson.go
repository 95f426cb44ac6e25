// Package rawjson splits JSON objects into their members and writes them
// back, without decoding the values: what encoding/json does through a
// map[string]json.RawMessage, with the same results, at a fraction of the
// work. The worker reads each request line and each method's params this
// way, once, and leaves the decoding of each member to whoever needs it.
package rawjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// EachMember calls fn with the name (a JSON string, quotes included) and the
// value (as written, without surrounding whitespace) of each member of the
// JSON object data, in order, and reports whether data is a valid JSON
// object (whitespace around it allowed). When it is not, fn is not called.
// The slices alias data.
func EachMember(data []byte, fn func(name, value []byte)) bool {
	start := skipSpace(data, 0)
	if start == len(data) || data[start] != '{' || !json.Valid(data) {
		return false
	}
	i := skipSpace(data, start+1)
	if data[i] == '}' {
		return true
	}
	for {
		// data[i] is the opening quote of a member's name.
		nameEnd := endOfString(data, i)
		name := data[i:nameEnd:nameEnd]
		i = skipSpace(data, nameEnd)
		i = skipSpace(data, i+1) // the colon
		valueEnd := endOfValue(data, i)
		fn(name, data[i:valueEnd:valueEnd])
		i = skipSpace(data, valueEnd)
		if data[i] == '}' {
			return true
		}
		i = skipSpace(data, i+1) // the comma
	}
}

// String decodes the valid JSON string raw as json.Unmarshal does (escapes
// resolved, invalid UTF-8 replaced by U+FFFD).
func String(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	if isPlain(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// isPlain reports whether b is ASCII without backslashes.
func isPlain(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Object decodes the JSON object data as json.Unmarshal decodes it into a
// map[string]json.RawMessage (names decoded, the last of equal names kept),
// and reports whether data was one. The values alias data.
func Object(data []byte) (map[string]json.RawMessage, bool) {
	obj := map[string]json.RawMessage{}
	ok := EachMember(data, func(name, value []byte) {
		obj[String(name)] = value
	})
	if !ok {
		return nil, false
	}
	return obj, true
}

// AppendObject appends to dst what json.Marshal writes for obj, byte for
// byte: the members sorted by name, names escaped as json.Marshal escapes
// them, values compacted with <, >, & and U+2028/U+2029 escaped. A nil obj
// is written as null. The values must be valid JSON, as Object's are: one
// that is already compact is copied without the check json.Marshal makes
// of every value, much of its cost.
func AppendObject(dst []byte, obj map[string]json.RawMessage) ([]byte, error) {
	if obj == nil {
		return append(dst, "null"...), nil
	}
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	slices.Sort(names)
	dst = append(dst, '{')
	for i, name := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		if isSafeName(name) {
			dst = append(dst, '"')
			dst = append(dst, name...)
			dst = append(dst, '"')
		} else {
			b, err := json.Marshal(name)
			if err != nil {
				return nil, err
			}
			dst = append(dst, b...)
		}
		dst = append(dst, ':')
		value := obj[name]
		if isCompactAndSafe(value) {
			dst = append(dst, value...)
			continue
		}
		b, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		dst = append(dst, b...)
	}
	return append(dst, '}'), nil
}

// isSafeName reports whether json.Marshal writes name between quotes as it
// is: printable ASCII other than ", \, <, > and &.
func isSafeName(name string) bool {
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c < 0x20, c >= utf8.RuneSelf, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// isCompactAndSafe reports whether a valid JSON value is already as
// json.Marshal writes a json.RawMessage: no whitespace, nothing it escapes
// for HTML (<, >, &, and U+2028/U+2029, whose UTF-8 starts with 0xE2). An
// empty value is not (json.Marshal writes null for it).
func isCompactAndSafe(value []byte) bool {
	if len(value) == 0 {
		return false
	}
	for _, c := range value {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}

// The walkers below assume valid JSON and return the index just past what
// they skip.

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// endOfString returns the index just past the string opening at data[i].
func endOfString(data []byte, i int) int {
	i++
	for {
		end := i + bytes.IndexByte(data[i:], '"')
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		n := 0
		for k := end - 1; k >= i && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return end + 1
		}
		i = end + 1
	}
}

// endOfValue returns the index just past the value starting at data[i].
func endOfValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return endOfString(data, i)
	case '{', '[':
		depth := 0
		for {
			switch data[i] {
			case '"':
				i = endOfString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	// A number or a literal ends where the next separator starts.
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
