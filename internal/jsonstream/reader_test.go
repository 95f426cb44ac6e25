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

// Escapes decoded from the buffered window, escapes cut by its end (read on
// one at a time) and long runs all decode as encoding/json does, into the
// digest and into kept strings, whatever the buffer size.
func TestReaderDecodesEscapesAcrossBufferBoundaries(t *testing.T) {
	t.Parallel()
	var raw []byte
	for c := range 0x80 {
		raw = append(raw, byte(c))
	}
	raw = append(raw, "é日本語🎉"...)
	raw = append(raw, strings.Repeat("x", 100)...)
	encoded, err := json.Marshal(string(raw))
	require.NoError(t, err)
	// encoding/json writes no surrogate pairs; add a pair, a lone half
	// before a run, one before a bad partner, and one at the very end.
	extra := `\u00e9\u00FF\u001F\ud83c\udf89\ud800x\udbff\u0041\"\\\/\b\f\n\r\t\ud83c`
	body := strings.Repeat(string(encoded[1:len(encoded)-1]), 3) + extra
	var want string
	require.NoError(t, json.Unmarshal([]byte(`"`+body+`"`), &want))
	seed := maphash.MakeSeed()
	for size := 16; size <= 80; size++ {
		line := `{"kept":"` + body + `","hashed":"` + body + `"}` + "\n"
		r := NewReader(bufio.NewReaderSize(strings.NewReader(line), size))
		r.Hash = func(p []string) bool { return len(p) == 1 && p[0] == "hashed" }
		r.NewDigest = func() hash.Hash64 {
			h := &maphash.Hash{}
			h.SetSeed(seed)
			return h
		}
		got, err := r.Next()
		require.NoError(t, err, "buffer of %d bytes", size)
		m := got.(map[string]any)
		require.Equal(t, want, m["kept"], "buffer of %d bytes", size)
		require.Equal(t, maphash.String(seed, want), m["hashed"].(Text).Sum, "buffer of %d bytes", size)
		require.EqualValues(t, len(want), m["hashed"].(Text).N, "buffer of %d bytes", size)
	}
	for _, bad := range []string{`"a\u00zz"`, `"a\x"`, `"a\u12G4"`, `"\ud83c\uZZZZ"`} {
		for size := 16; size <= 20; size++ {
			_, err := NewReader(bufio.NewReaderSize(strings.NewReader(strings.Repeat(" ", size-3)+bad+"\n"), size)).Next()
			assert.Error(t, err, "%s with a buffer of %d bytes", bad, size)
		}
	}
}
