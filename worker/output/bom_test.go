package output

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A stream loses the byte-order mark it begins with, and only that one,
// however its bytes are cut into writes: what the SDK's streaming
// TextDecoder does to each stream of a session command's log.
func TestMarkDropperDropsOnlyTheMarkThatBeginsTheStream(t *testing.T) {
	t.Parallel()
	const bom = "\xef\xbb\xbf"
	for _, tc := range []struct {
		name, in, want string
		dropped        bool
	}{
		{"mark then text", bom + "abc", "abc", true},
		{"two marks: the second stays", bom + bom + "x", bom + "x", true},
		{"the mark alone", bom, "", true},
		{"a mark after text stays", "a" + bom, "a" + bom, false},
		{"a stray byte first: U+FFFD is the first character", "\x80" + bom, "\x80" + bom, false},
		{"the start of a mark, then another character", "\xef\xbbA", "\xef\xbbA", false},
		{"the start of a mark, then the end of the stream", "\xef\xbb", "\xef\xbb", false},
		{"another three-byte character", "\xe2\x82\xac" + bom, "\xe2\x82\xac" + bom, false},
		{"an empty stream", "", "", false},
	} {
		for cut1 := 0; cut1 <= len(tc.in); cut1++ {
			for cut2 := cut1; cut2 <= len(tc.in); cut2++ {
				var out bytes.Buffer
				d := &MarkDropper{w: &out}
				for _, p := range []string{tc.in[:cut1], "", tc.in[cut1:cut2], tc.in[cut2:]} {
					n, err := d.Write([]byte(p))
					assert.NoError(t, err)
					assert.Equal(t, len(p), n)
				}
				d.Flush()
				assert.Equal(t, tc.want, out.String(), "%s, cut at %d and %d", tc.name, cut1, cut2)
				assert.Equal(t, tc.dropped, d.dropped, tc.name)
				// The logs endpoint's snapshot keeps the mark: trimmed, it
				// lines up with what was passed on.
				assert.Equal(t, tc.want, d.TrimDropped(tc.in), tc.name)
			}
		}
	}
}
