package js

import (
	"regexp"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
)

func TestTrimDropsJavaScriptsWhitespace(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"\ufeff \t{\"a\":1}\u00a0\u2028 ": `{"a":1}`,
		"\u2000x\u200a":                   "x",
		" a b ":                           "a b",
		// U+0085 and U+180E are not JavaScript white space (Go's
		// unicode.IsSpace takes U+0085).
		"\u0085x\u180e": "\u0085x\u180e",
		"\xffx\xff":     "\xffx\xff",
		"":              "",
	} {
		assert.Equal(t, want, Trim(in), "%q", in)
		assert.Equal(t, want, string(TrimBytes([]byte(in))), "%q", in)
	}
}

// IsSpace and the regular expression classes name the same characters.
func TestSpaceClassesMatchIsSpace(t *testing.T) {
	t.Parallel()
	space := regexp.MustCompile(`^` + SpaceClass + `$`)
	nonSpace := regexp.MustCompile(`^` + NonSpaceClass + `$`)
	line := regexp.MustCompile(`^` + LineClass + `$`)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r == 0x10000 {
			r = unicode.MaxRune // past the BMP nothing is white space
		}
		s := string(r)
		assert.Equal(t, IsSpace(r), space.MatchString(s), "%U", r)
		assert.Equal(t, !IsSpace(r), nonSpace.MatchString(s), "%U", r)
		terminator := r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029
		assert.Equal(t, !terminator, line.MatchString(s), "%U", r)
	}
}
