package jsonstream

import (
	"bufio"
	"encoding/json"
	"hash"
	"hash/maphash"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReaderAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	values := []string{
		`{"a":"x\"y\\z\/\b\f\n\r\tq","b":[1,-2.5e3,true,false,null,{}],"c":[],"d":"ü日本🎉\u00fc\u65e5\ud83c\udf89","e":"\ud800x\udc00"}`,
		`{"jsonrpc":"2.0","id":"r-1","result":{"exitCode":null,"stdout":"` + strings.Repeat(`a\n`, 70000) + `"}}`,
		`[ "lone \ud83c", "pair\ud83c\udf89end", 0, 1e-7 ]`,
	}
	for _, v := range values {
		var want any
		require.NoError(t, json.Unmarshal([]byte(v), &want))
		r := NewReader(bufio.NewReaderSize(strings.NewReader(v+"\n"), 16))
		got, err := r.Next()
		require.NoError(t, err)
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		assert.JSONEq(t, string(wantJSON), string(gotJSON))
	}
}

func TestReaderDigestsTheChosenStrings(t *testing.T) {
	t.Parallel()
	seed := maphash.MakeSeed()
	r := NewReader(bufio.NewReader(strings.NewReader(`{"result":{"stdout":"ab\ncd","stderr":"e"}}` + "\n")))
	r.Hash = func(p []string) bool { return strings.Join(p, ".") == "result.stdout" }
	r.NewDigest = func() hash.Hash64 {
		h := &maphash.Hash{}
		h.SetSeed(seed)
		return h
	}
	got, err := r.Next()
	require.NoError(t, err)
	res := got.(map[string]any)["result"].(map[string]any)
	st := res["stdout"].(Text)
	assert.Equal(t, maphash.Bytes(seed, []byte("ab\ncd")), st.Sum)
	assert.EqualValues(t, 5, st.N)
	assert.Equal(t, "ab\ncd", st.Head)
	assert.Equal(t, "e", res["stderr"], "strings not chosen are kept")
}

func TestReaderWantsOneValuePerLine(t *testing.T) {
	t.Parallel()
	r := NewReader(bufio.NewReader(strings.NewReader(`{} {}` + "\n")))
	_, err := r.Next()
	assert.ErrorIs(t, err, ErrNotNDJSON)
}

func TestReaderHandsRawStringsInReusedMemory(t *testing.T) {
	t.Parallel()
	lines := `{"params":{"chunk":"a\u00e9\\n\"b","stream":"stdout"}}` + "\n" + `{"params":{"chunk":"second"}}` + "\n"
	r := NewReader(bufio.NewReader(strings.NewReader(lines)))
	r.Raw = func(p []string) bool { return strings.Join(p, ".") == "params.chunk" }
	got, err := r.Next()
	require.NoError(t, err)
	params := got.(map[string]any)["params"].(map[string]any)
	assert.Equal(t, Bytes("aé\\n\"b"), params["chunk"])
	assert.Equal(t, "stdout", params["stream"], "strings not chosen are strings")
	got, err = r.Next()
	require.NoError(t, err)
	assert.Equal(t, Bytes("second"), got.(map[string]any)["params"].(map[string]any)["chunk"])
}
