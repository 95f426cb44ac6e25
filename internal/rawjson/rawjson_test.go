package rawjson

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var seeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"b":[1,{"c":"}]\"{"}],"a":"\\"}`,
	"{\"a\" :\r\n\t[ 1 , 2 ] , \"b\" : { \"x\" : null } }",
	`{"\u0069d":1,"id":2}`, `{"id":1,"\u0069d":2}`, `{"k\"q":"v\\\"w"}`,
	`{"` + "\xff" + `":1,"` + "\xfe" + `":2}`, `{"a":"` + "\xff" + `"}`,
	`{"<&>":"<&>","x":"` + "\u2028\u2029" + `"}`, `{"a":-1.5e+300,"b":true,"c":false,"d":null}`,
	`{"Command":"a","command":"b"}`, `{"a":"\u0000\u001f","b":"\t"}`,
	`[]`, `null`, `"s"`, `1`, `{`, `{"a":1}x`, `{"a":1,}`, `{"a"}`, ``, ` `,
	`{"a":{"b":{"c":{"d":[[[[]]]]}}}}`,
}

func TestObjectDecodesAsTheMapDecoder(t *testing.T) {
	t.Parallel()
	for _, s := range seeds {
		requireSameObject(t, []byte(s))
	}
}

func FuzzObjectDecodesAsTheMapDecoder(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(requireSameObject)
}

func requireSameObject(t *testing.T, data []byte) {
	var want map[string]json.RawMessage
	wantErr := json.Unmarshal(data, &want)
	got, ok := Object(data)
	if wantErr != nil || want == nil { // not an object (null decodes to a nil map)
		require.False(t, ok, "%q", data)
		return
	}
	require.True(t, ok, "%q", data)
	require.Equal(t, len(want), len(got), "%q", data)
	for k, v := range want {
		require.Contains(t, got, k, "%q", data)
		require.Equal(t, string(v), string(got[k]), "%q member %q", data, k)
	}
	// And back: byte for byte what json.Marshal writes.
	wantOut, err := json.Marshal(want)
	require.NoError(t, err)
	gotOut, err := AppendObject(nil, got)
	require.NoError(t, err)
	require.Equal(t, string(wantOut), string(gotOut), "%q", data)
}

// AppendObject writes what json.Marshal writes for values no decoder
// produced (empty, with whitespace, a nil map), and fails where it fails on
// an invalid value that is not compact.
func TestAppendObjectMatchesMarshalOnOddValues(t *testing.T) {
	t.Parallel()
	for _, obj := range []map[string]json.RawMessage{
		nil, {}, {"a": nil}, {"a": json.RawMessage{}}, {"a": json.RawMessage(" 1 ")},
		{"a": json.RawMessage("{ ")}, {"a": json.RawMessage("1 2")}, {"": json.RawMessage("1")},
		{"\n": json.RawMessage(`"\u0041"`)}, {"é": json.RawMessage(`"é"`)},
	} {
		want, wantErr := json.Marshal(obj)
		got, gotErr := AppendObject(nil, obj)
		if wantErr != nil {
			assert.Error(t, gotErr, "%v", obj)
			continue
		}
		require.NoError(t, gotErr, "%v", obj)
		assert.Equal(t, string(want), string(got), "%v", obj)
	}
}

func TestStringDecodesAsUnmarshal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`""`, `"abc"`, `"a\"b"`, `"\u00e9"`, "\"\xff\"", `"é"`, `"\\"`, `"\ud800"`} {
		var want string
		require.NoError(t, json.Unmarshal([]byte(s), &want))
		assert.Equal(t, want, String([]byte(s)), "%q", s)
	}
}
