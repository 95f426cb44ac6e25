package js

import (
	"encoding/json"
	"errors"
	"strconv"
)

// ErrTooLong is BufferFrom's refusal of an array-like object whose length
// is beyond the limit it was given.
var ErrTooLong = errors.New("array-like object too long")

// BufferFrom is Buffer.from(v) of a decoded value that is not a string, when
// Buffer.from takes it: an array (each element Number()'d and stored as a
// Uint8Array stores it), an object with a length (its members "0" to
// length-1 likewise; a length that is not a number makes no bytes), and the
// JSON form of a Buffer ({"type": "Buffer", "data": [...]}). ok is false for
// every other value, which Buffer.from refuses with a TypeError.
//
// Node allocates whatever length an array-like object names; BufferFrom
// refuses one longer than limit bytes with ErrTooLong.
func BufferFrom(v any, limit int) (b []byte, ok bool, err error) {
	switch v := v.(type) {
	case []any:
		return uint8s(v), true, nil
	case *Object:
		if length, has := v.Get("length"); has {
			n, isNumber := length.(json.Number)
			if !isNumber {
				return []byte{}, true, nil
			}
			size := ToLength(Number(n))
			if size > float64(limit) {
				return nil, true, ErrTooLong
			}
			out := make([]byte, int(size))
			for i := range out {
				x, _ := v.Get(strconv.Itoa(i))
				out[i] = ToUint8(Number(x))
			}
			return out, true, nil
		}
		if typ, _ := v.Get("type"); typ == "Buffer" {
			data, _ := v.Get("data")
			if list, isArray := data.([]any); isArray {
				return uint8s(list), true, nil
			}
		}
	}
	return nil, false, nil
}

func uint8s(list []any) []byte {
	out := make([]byte, len(list))
	for i, x := range list {
		out[i] = ToUint8(Number(x))
	}
	return out
}
