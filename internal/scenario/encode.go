package scenario

import (
	"bytes"
	"encoding/json"
	"sort"
)

// keyRank orders the envelope members first, as the Node worker writes them,
// so rewritten transcripts read like the wire.
var keyRank = map[string]int{
	"jsonrpc": 1, "id": 2, "method": 3, "params": 4, "result": 5, "error": 6, "paperclipInvocationId": 7,
	"code": 8, "message": 9, "data": 10,
}

// EncodeOrdered writes v as compact JSON without HTML escaping, with object
// keys in envelope order and then alphabetically.
func EncodeOrdered(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeOrdered(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeOrdered(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			ri, rj := keyRank[keys[i]], keyRank[keys[j]]
			switch {
			case ri != 0 && rj != 0:
				return ri < rj
			case ri != 0:
				return true
			case rj != 0:
				return false
			}
			return keys[i] < keys[j]
		})
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeScalar(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeOrdered(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case []any:
		buf.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeOrdered(buf, x); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	}
	return writeScalar(buf, v)
}

func writeScalar(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // the encoder's newline
	return nil
}
