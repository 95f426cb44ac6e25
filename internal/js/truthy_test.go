package js

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTruthiness(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]bool{
		`null`: false, `false`: false, `""`: false, `0`: false, `-0`: false, `0.0`: false, `0e5`: false,
		`"x"`: true, `"0"`: true, `" "`: true, `1`: true, `-1`: true, `1e400`: true, `1e-400`: false,
		`{}`: true, `[]`: true, `true`: true, ` "" `: false,
	} {
		assert.Equal(t, want, Truthy(decoded(t, text)), "Boolean(%s)", text)
		assert.Equal(t, want, TruthyJSON([]byte(text)), "Boolean(%s) unparsed", text)
	}
	assert.False(t, TruthyJSON(nil), "undefined")
	assert.False(t, TruthyJSON([]byte(" ")), "undefined")
	assert.False(t, Truthy(0.0))
	assert.True(t, Truthy(0.5))
}
