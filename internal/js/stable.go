package js

import (
	"encoding/json"
	"sort"
	"strings"
)

// StableStringify is the plugin's stableStringify: JSON.stringify with
// object keys sorted at every level. Values are JSON-ready Go values (string,
// bool, nil, float64/int, json.Number, map[string]any, []any, *Object,
// *string, *float64); a nil pointer is null.
func StableStringify(v any) string {
	var b strings.Builder
	writeStable(&b, v)
	return b.String()
}

func writeStable(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case *string:
		if v == nil {
			b.WriteString("null")
			return
		}
		writeStable(b, *v)
	case *float64:
		if v == nil {
			b.WriteString("null")
			return
		}
		b.WriteString(NumberJSON(*v))
	case float64:
		b.WriteString(NumberJSON(v))
	case int:
		b.WriteString(NumberJSON(float64(v)))
	case json.Number:
		b.WriteString(NumberJSON(Number(v)))
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		b.WriteString(Quote(v))
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeStable(b, x)
		}
		b.WriteByte(']')
	case *Object:
		members := make(map[string]any, len(v.Keys()))
		for _, k := range v.Keys() {
			members[k], _ = v.Get(k)
		}
		writeStable(b, members)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(Quote(k))
			b.WriteByte(':')
			writeStable(b, v[k])
		}
		b.WriteByte('}')
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			b.WriteString("null")
			return
		}
		b.Write(raw)
	}
}
