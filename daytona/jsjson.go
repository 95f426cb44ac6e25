package daytona

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/jsquote"
)

// jsObject is a JSON object as JavaScript's JSON.parse builds it: a key
// seen twice keeps its first place and its last value.
type jsObject struct {
	keys []string
	vals map[string]any
}

// jsRestringify renders a JSON text as JSON.stringify(JSON.parse(text))
// does in JavaScript: no whitespace, strings with only the escapes JSON
// needs, numbers as JavaScript prints them (1.50 is 1.5, 1e2 is 100, one
// out of range is null), duplicate keys collapsed and integer-like keys
// first, in ascending order, as a JavaScript object orders them. It reports
// false when text is not one JSON value.
func jsRestringify(text []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	v, err := jsDecode(dec)
	if err != nil {
		return "", false
	}
	if _, err := dec.Token(); err == nil {
		return "", false // more than one value
	}
	var b strings.Builder
	jsWrite(&b, v)
	return b.String(), true
}

func jsDecode(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jsObject{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := jsDecode(dec)
				if err != nil {
					return nil, err
				}
				if _, seen := o.vals[k]; !seen {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := jsDecode(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ']'
			return a, err
		}
	}
	return tok, nil
}

// jsArrayIndex reports a key JavaScript treats as an array index (a
// canonical integer below 2^32-1), which objects list first.
func jsArrayIndex(k string) (uint64, bool) {
	n, err := strconv.ParseUint(k, 10, 32)
	if err != nil || n == math.MaxUint32 || strconv.FormatUint(n, 10) != k {
		return 0, false
	}
	return n, true
}

func jsWrite(b *strings.Builder, v any) {
	switch v := v.(type) {
	case *jsObject:
		keys := slices.Clone(v.keys)
		slices.SortStableFunc(keys, func(x, y string) int {
			nx, ix := jsArrayIndex(x)
			ny, iy := jsArrayIndex(y)
			switch {
			case ix && iy:
				return cmpUint(nx, ny)
			case ix:
				return -1
			case iy:
				return 1
			}
			return 0
		})
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			jsquote.Write(b, k)
			b.WriteByte(':')
			jsWrite(b, v.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			jsWrite(b, e)
		}
		b.WriteByte(']')
	case string:
		jsquote.Write(b, v)
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		switch {
		case err != nil && !math.IsInf(f, 0):
			b.WriteString(string(v))
		case math.IsInf(f, 0):
			b.WriteString("null")
		case f == 0:
			b.WriteString("0")
		default:
			b.WriteString(jsNumberText(f))
		}
	case bool:
		b.WriteString(strconv.FormatBool(v))
	default:
		b.WriteString("null")
	}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
