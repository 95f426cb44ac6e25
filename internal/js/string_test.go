package js

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStringAndTemplateString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ text, str, template string }{
		{`[]`, ``, ``},
		{`[null]`, ``, ``},
		{`[1,[2,null],"x"]`, `1,2,,x`, `1,2,,x`},
		{`{}`, `[object Object]`, `[object Object]`},
		{`[{}]`, `[object Object]`, `[object Object]`},
		{`true`, `true`, `true`},
		{`false`, `false`, `false`},
		{`1e21`, `1e+21`, `1e+21`},
		{`1.50`, `1.5`, `1.5`},
		{`-0`, `0`, `0`},
		{`1e400`, `Infinity`, `Infinity`},
		{`[-1e400,1e-400]`, `-Infinity,0`, `-Infinity,0`},
		{`"s"`, `s`, `s`},
		{`null`, ``, `null`},
	} {
		v := decoded(t, tt.text)
		assert.Equal(t, tt.str, String(v), "String(%s)", tt.text)
		assert.Equal(t, tt.template, TemplateString(v), "`${%s}`", tt.text)
		assert.Equal(t, tt.template, TemplateJSON([]byte(tt.text)), "`${%s}`", tt.text)
	}
	assert.Equal(t, "undefined", TemplateJSON(nil))
	assert.Equal(t, "undefined", TemplateJSON([]byte(" ")))
	assert.Equal(t, "", TemplateJSON([]byte("{")))
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
