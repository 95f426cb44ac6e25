package js

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStableStringifySortsKeysAtEveryLevel(t *testing.T) {
	t.Parallel()
	obj, _ := Decode([]byte(`{"z":1,"2":[true,"x"],"a":{"b":null,"a":1e21}}`))
	var none *string
	for _, tc := range []struct {
		v    any
		want string
	}{
		// U+2028 stays as it is, as JSON.stringify leaves it.
		{map[string]any{"b": 1.5, "a": "é\u2028", "c": none}, "{\"a\":\"é\u2028\",\"b\":1.5,\"c\":null}"},
		{obj, `{"2":[true,"x"],"a":{"a":1e+21,"b":null},"z":1}`},
		{[]any{json.Number("1.0"), 3, false, nil}, `[1,3,false,null]`},
		{map[string]any{"m": map[string]any{"y": 0.1, "x": math.Copysign(0, -1)}}, `{"m":{"x":0,"y":0.1}}`},
	} {
		assert.Equal(t, tc.want, StableStringify(tc.v))
	}
}
