package output

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The forms a logs snapshot may give the same raw output in.
var snapshotForms = []struct {
	name string
	of   func(raw []byte) string
}{
	{"verbatim", func(raw []byte) string { return string(raw) }},
	// Go's encoding/json (Daytona's daemon, the emulator): U+FFFD per byte.
	{"per byte", func(raw []byte) string { return string([]rune(string(raw))) }},
}

// relayHolding is a relay whose stdout holds the given blocks, as streamed.
func relayHolding(blocks ...[]byte) *Relay {
	r := startLogRelay(func(int, [][]byte) error { return nil })
	for _, b := range blocks {
		r.out[0].blocks = append(r.out[0].blocks, b)
		r.out[0].n += int64(len(b))
	}
	return r
}

func TestUnstreamedTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		streamed []string // the relay's blocks
		snapshot string
		want     string
		ok       bool
	}{
		{"nothing streamed", nil, "abc\n", "abc\n", true},
		{"all streamed", []string{"abc\n"}, "abc\n", "", true},
		{"ascii tail", []string{"ab"}, "abc\n", "c\n", true},
		// The reviewer's case: 2 raw bytes are 6 bytes of the JSON snapshot.
		{"per-byte replacement before the cut", []string{"\xff\xffabc"}, "\uFFFD\uFFFDabcdef\n", "def\n", true},
		{"verbatim ill-formed bytes", []string{"\xff\xffabc"}, "\xff\xffabcdef\n", "def\n", true},
		{"per byte for a cut-off lead", []string{"\xe2\x82a"}, "\uFFFD\uFFFDab", "b", true},
		{"character cut by the stream's end", []string{"x\xe2\x82"}, "x€y", "\xacy", true},
		{"cut character the snapshot shows ill-formed", []string{"x\xe2\x82"}, "x\uFFFD\uFFFDy", "y", true},
		{"character across blocks", []string{"x\xe2", "\x82", "\xacz\xff", "q"}, "x€z\uFFFDqr", "r", true},
		{"ill-formed across blocks", []string{"\xe2", "\x82", "a"}, "\uFFFD\uFFFDab", "b", true},
		{"a real U+FFFD streamed", []string{"\xef\xbf\xbd\xffq"}, "\uFFFD\uFFFDqz", "z", true},
		{"snapshot shorter than the stream", []string{"abcdef"}, "abc", "", false},
		{"snapshot of other output", []string{"abc"}, "xyz123", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var blocks [][]byte
			for _, s := range tt.streamed {
				blocks = append(blocks, []byte(s))
			}
			got, ok := relayHolding(blocks...).UnstreamedTail(0, tt.snapshot)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

// For any output, any point the stream stopped at, any split of what it
// gave into blocks and any form of the snapshot, the streamed bytes and the
// tail together are the output again, as the snapshot's form shows it:
// nothing repeated, nothing missed.
func TestUnstreamedTailCompletesTheOutput(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for range 3000 {
		raw := randomUTF8ish(rng, rng.IntN(24))
		cut := rng.IntN(len(raw) + 1)
		var blocks [][]byte
		for rest := raw[:cut]; len(rest) > 0; {
			n := 1 + rng.IntN(len(rest))
			blocks = append(blocks, rest[:n:n])
			rest = rest[n:]
		}
		for _, form := range snapshotForms {
			snap := form.of(raw)
			tail, ok := relayHolding(blocks...).UnstreamedTail(0, snap)
			require.True(t, ok, "%s: raw %q cut at %d", form.name, raw, cut)
			joined := append(append([]byte(nil), raw[:cut]...), tail...)
			require.Equal(t, snap, form.of(joined), "%s: raw %q cut at %d, tail %q", form.name, raw, cut, tail)
		}
	}
}

// randomUTF8ish is n bytes mixing ASCII, whole characters, lone lead and
// continuation bytes and U+FFFD itself.
func randomUTF8ish(rng *rand.Rand, n int) []byte {
	var out []byte
	for len(out) < n {
		switch rng.IntN(5) {
		case 0:
			out = append(out, byte('a'+rng.IntN(26)))
		case 1:
			out = append(out, []string{"é", "€", "😀", "\uFFFD"}[rng.IntN(4)]...)
		case 2:
			out = append(out, byte(0x80+rng.IntN(0x40)))
		default:
			out = append(out, byte(0xC0+rng.IntN(0x38)))
		}
	}
	return out
}
