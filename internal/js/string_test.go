package js

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ text, str string }{
		{`[]`, ``},
		{`[null]`, ``},
		{`[1,[2,null],"x"]`, `1,2,,x`},
		{`{}`, `[object Object]`},
		{`[{}]`, `[object Object]`},
		{`true`, `true`},
		{`false`, `false`},
		{`1e21`, `1e+21`},
		{`1.50`, `1.5`},
		{`-0`, `0`},
		{`1e400`, `Infinity`},
		{`[-1e400,1e-400]`, `-Infinity,0`},
		{`"s"`, `s`},
		{`null`, `null`},
	} {
		assert.Equal(t, tt.str, String(decoded(t, tt.text)), "String(%s)", tt.text)
		assert.Equal(t, tt.str, StringJSON([]byte(tt.text)), "String(%s)", tt.text)
	}
	assert.Equal(t, "undefined", StringJSON(nil))
	assert.Equal(t, "undefined", StringJSON([]byte(" ")))
	assert.Equal(t, "", StringJSON([]byte("{")))
	assert.Equal(t, "2.5", String(2.5))
}

func TestLengthCountsUTF16Units(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"": 0, "abc": 3, "é😀": 3, "\xff": 1, "€": 1} {
		assert.Equal(t, want, Length(s), "%q", s)
	}
}

func TestToLower(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"İx": "i\u0307x", "ABC": "abc", "ÉA": "éa", "ß": "ß"} {
		assert.Equal(t, want, ToLower(in), in)
	}
}
