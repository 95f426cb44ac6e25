package worker

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
)

// maxArrayLikeStdin bounds the bytes an array-like stdin ({"length": n})
// may ask for: the plugin would allocate whatever length a request names,
// and a one-line request must not make the worker allocate gigabytes.
const maxArrayLikeStdin = 64 << 20

var errArrayLikeStdinTooLong = errors.New("params.stdin is an array-like object longer than 64 MiB")

// stdinBytes is the plugin's Buffer.from(params.stdin, "utf8") for a stdin
// that is no string, when Buffer.from takes it: an array (each entry
// Number()'d and wrapped to a byte, as a Uint8Array stores it), an object
// with a length (its members "0" to length-1 likewise; a length that is no
// number makes no bytes) and the JSON form of a Buffer ({"type": "Buffer",
// "data": [...]}). ok is false for every other value, which Buffer.from
// refuses with a TypeError (row wrong-param-types).
func stdinBytes(raw json.RawMessage) (b []byte, ok bool, err error) {
	switch jsonKindOf(raw) {
	case "array", "object":
	default:
		return nil, false, nil
	}
	v, decoded := decodeJS(raw)
	if !decoded {
		return nil, false, nil
	}
	switch v := v.(type) {
	case []any:
		return uint8sOf(v), true, nil
	case *jsObject:
		if length, has := v.vals["length"]; has {
			n, isNumber := length.(json.Number)
			if !isNumber {
				return []byte{}, true, nil
			}
			size := jsToLength(jsNumber(n))
			if size > maxArrayLikeStdin {
				return nil, true, errArrayLikeStdinTooLong
			}
			out := make([]byte, int(size))
			for i := range out {
				out[i] = jsToUint8(jsNumber(v.vals[strconv.Itoa(i)]))
			}
			return out, true, nil
		}
		if v.vals["type"] == "Buffer" {
			if data, isArray := v.vals["data"].([]any); isArray {
				return uint8sOf(data), true, nil
			}
		}
	}
	return nil, false, nil
}

func uint8sOf(list []any) []byte {
	out := make([]byte, len(list))
	for i, x := range list {
		out[i] = jsToUint8(jsNumber(x))
	}
	return out
}

// jsToUint8 is ToUint8: NaN and infinities are 0, anything else is
// truncated and taken modulo 256.
func jsToUint8(f float64) byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	m := math.Mod(math.Trunc(f), 256)
	if m < 0 {
		m += 256
	}
	return byte(m)
}

// jsToLength is ToLength: NaN and negatives are 0, the rest truncated and
// capped at 2^53-1.
func jsToLength(f float64) float64 {
	if math.IsNaN(f) || f <= 0 {
		return 0
	}
	return math.Min(math.Trunc(f), 1<<53-1)
}
