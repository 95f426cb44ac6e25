package jsquote

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The expected texts are Node's JSON.stringify of the same strings (for an
// invalid byte, of the string Node decodes from it).
func TestStringQuotesAsJSONStringify(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":             `""`,
		`a"b\c`:        `"a\"b\\c"`,
		"\b\f\n\r\t":   `"\b\f\n\r\t"`,
		"\x00\x1f\x7f": `"\u0000\u001f` + "\x7f\"",
		"<&>":          `"<&>"`,
		"ü€😀":          `"ü€😀"`,
		"\u2028\u2029": "\"\u2028\u2029\"",
		"bad\xffbyte":  "\"bad\uFFFDbyte\"",
		"cut\xe2\x82":  "\"cut\uFFFD\uFFFD\"",
	} {
		assert.Equal(t, want, String(in), "%q", in)
	}
}
