package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/js"
)

// jsUnits is the length JavaScript gives the string JSON.parse makes of a
// JSON text (what the host's line length counts, once per character).
func jsUnits(s string) int64 { return int64(js.Length(s)) }

// splitBlocks holds p in a Buffer whose blocks end at random places
// (runes cut across blocks included).
func splitBlocks(rng *rand.Rand, p []byte) *Buffer {
	b := &Buffer{n: int64(len(p))}
	for len(p) > 0 {
		n := min(1+rng.IntN(9), len(p))
		if rng.IntN(4) == 0 {
			n = min(1+rng.IntN(4096), len(p))
		}
		b.blocks = append(b.blocks, bytes.Clone(p[:n]))
		p = p[n:]
	}
	return b
}

// outputPieces are what outputs are made of in these tests: every kind of
// byte the escaper treats apart.
var outputPieces = []string{
	"plain text ", "line\n", "\"quoted\\", "\x00\x01\x1f\t\r", "é", "中文", "😀", "\u2028\u2029",
	"\xff", "\xe4\xb8", "\xf0\x9f\x98", "\xed\xa0\x80", "\xc0\xaf", strings.Repeat("x", 300) + "\n",
}

func randomOutput(rng *rand.Rand, pieces int) []byte {
	var b bytes.Buffer
	for range pieces {
		b.WriteString(outputPieces[rng.IntN(len(outputPieces))])
	}
	return b.Bytes()
}

func encodeCut(t *testing.T, b *Buffer, cut outputCut) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, b.writeJSONCut(&out, cut))
	return out.String()
}

func TestJSONUnitsCountWhatTheWriterWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		p := randomOutput(rng, rng.IntN(60))
		b := splitBlocks(rng, p)
		enc := encodeCut(t, b, outputCut{})
		var s string
		require.NoError(t, json.Unmarshal([]byte(enc), &s), "case %d: %q", i, enc)
		units := b.jsonUnits()
		assert.Equal(t, utf16Units([]byte(enc)), units, "case %d: %q", i, p)
		assert.LessOrEqual(t, units, b.maxJSONUnits(), "case %d: the bound without reading", i)
		assert.Equal(t, jsUnits(enc), units, "case %d: as JavaScript counts the line", i)
	}
}

func TestMaxJSONUnitsUsesTheEscapeMap(t *testing.T) {
	// 1,000-byte lines as the relay maps them: the bound is about the
	// output's size, not six times it, so no output the host can take is
	// read again just to be measured.
	line := strings.Repeat("a", 999) + "\n"
	b := &Buffer{}
	_, _ = b.Write([]byte(strings.Repeat(line, 1000)))
	e := jsonStringWriter{w: &bytes.Buffer{}, m: &b.escapes}
	require.NoError(t, e.write(b.blocks[0]))
	assert.Equal(t, int64(2+999*1000+6*1000), b.maxJSONUnits())
	assert.Equal(t, int64(2+999*1000+2*1000), b.jsonUnits())
	// Without a map every byte may take six.
	assert.Equal(t, int64(2+6*len(line)), Text(line).maxJSONUnits())
}

func TestFitOutputsKeepsTheStartAndTheEnd(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "line %05d of the output\n", i)
		}
		return b.String()
	}
	tests := []struct {
		name           string
		stdout, stderr string
		budget         int64
		// whether each stream is cut
		cutOut, cutErr bool
		// whether the kept start ends, and the kept end starts, at a line break
		atLines bool
	}{
		{name: "both fit", stdout: lines(10), stderr: "warning\n", budget: 1 << 20},
		{name: "lines", stdout: lines(20000), stderr: "done\n", budget: 64 << 10, cutOut: true, atLines: true},
		{name: "one long line", stdout: strings.Repeat("y", 1<<20), budget: 64 << 10, cutOut: true},
		{name: "control bytes", stdout: strings.Repeat("\x01\x02\x1b[0m", 100000), budget: 64 << 10, cutOut: true},
		{name: "wide characters", stdout: strings.Repeat("中文字符😀\n", 60000), budget: 64 << 10, cutOut: true, atLines: true},
		{name: "stderr too", stdout: lines(20000), stderr: lines(20000), budget: 64 << 10, cutOut: true, cutErr: true, atLines: true},
		{name: "only stderr", stdout: "ok\n", stderr: lines(20000), budget: 64 << 10, cutErr: true, atLines: true},
		{name: "no room for more than the notes", stdout: lines(1000), stderr: lines(1000), budget: 100, cutOut: true, cutErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			out, errb := splitBlocks(rng, []byte(tt.stdout)), splitBlocks(rng, []byte(tt.stderr))
			outCut, errCut := fitOutputs(out, errb, tt.budget, 1<<27)
			encOut, encErr := encodeCut(t, out, outCut), encodeCut(t, errb, errCut)
			if tt.budget >= 4<<10 {
				assert.LessOrEqual(t, utf16Units([]byte(encOut))+utf16Units([]byte(encErr)), tt.budget, "within the budget")
			}
			for _, s := range []struct {
				name    string
				orig    string
				enc     string
				cut     outputCut
				wantCut bool
			}{{"stdout", tt.stdout, encOut, outCut, tt.cutOut}, {"stderr", tt.stderr, encErr, errCut, tt.cutErr}} {
				var got string
				require.NoError(t, json.Unmarshal([]byte(s.enc), &got), "%s is a JSON string", s.name)
				if !s.wantCut {
					assert.True(t, s.cut.whole(), "%s kept whole", s.name)
					assert.Equal(t, s.orig, got, "%s", s.name)
					continue
				}
				require.False(t, s.cut.whole(), "%s cut", s.name)
				head, tail := s.orig[:s.cut.head], s.orig[s.cut.tail:]
				omitted := len(s.orig) - len(head) - len(tail)
				note := fmt.Sprintf("[daytona-worker: %d bytes of %s left out here, so that the result stays within the 134217728 characters the Paperclip host reads in one message]", omitted, s.name)
				sep := "\n"
				if head == "" || strings.HasSuffix(head, "\n") {
					sep = ""
				}
				assert.Equal(t, head+sep+note+"\n"+tail, got, "%s: the start, a note on a line of its own, the end", s.name)
				if tt.budget >= 4<<10 {
					assert.NotEmpty(t, head, "%s keeps its start", s.name)
					assert.NotEmpty(t, tail, "%s keeps its end", s.name)
					// The room is shared: neither end is wasted.
					assert.Greater(t, utf16Units([]byte(s.enc)), tt.budget/4, "%s uses its share", s.name)
				}
				if tt.atLines {
					assert.True(t, strings.HasSuffix(head, "\n"), "%s's start ends at a line break", s.name)
					assert.True(t, strings.HasSuffix(s.orig[:s.cut.tail], "\n"), "%s's end starts after a line break", s.name)
				}
			}
		})
	}
}

func FuzzOutputCut(f *testing.F) {
	f.Add([]byte("hello\nworld\n\xff\xe4\xb8 😀 \u2028 \x01"), uint16(40), uint64(1))
	f.Add([]byte(strings.Repeat("\xf0\x9f\x98\x80", 50)), uint16(30), uint64(7))
	f.Add([]byte(strings.Repeat("a\n", 200)), uint16(150), uint64(9))
	f.Fuzz(func(t *testing.T, p []byte, allowance uint16, seed uint64) {
		b := splitBlocks(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), p)
		total := b.jsonUnits()
		want := utf16Units([]byte(encodeCut(t, b, outputCut{})))
		if total != want {
			t.Fatalf("jsonUnits %d, the writer wrote %d", total, want)
		}
		a := int64(allowance) + jsonTextUnits("\n"+cutNote("stdout", 1<<62, 1<<27)) + 2
		if a >= total {
			return
		}
		cut := b.cutTo(a, total, "stdout", 1<<27)
		enc := encodeCut(t, b, cut)
		if u := utf16Units([]byte(enc)); u > a {
			t.Fatalf("cut to %d units, wrote %d: %q", a, u, enc)
		}
		var got string
		if err := json.Unmarshal([]byte(enc), &got); err != nil {
			t.Fatal(err)
		}
		// The kept ends decode as they do in the whole output: the cuts
		// fall between runes (or maximal ill-formed subparts).
		var head, tail string
		require.NoError(t, json.Unmarshal([]byte(encodeCut(t, splitBlocks(rand.New(rand.NewPCG(1, 1)), p[:cut.head]), outputCut{})), &head))
		require.NoError(t, json.Unmarshal([]byte(encodeCut(t, splitBlocks(rand.New(rand.NewPCG(1, 1)), p[cut.tail:]), outputCut{})), &tail))
		var all string
		require.NoError(t, json.Unmarshal([]byte(encodeCut(t, b, outputCut{})), &all))
		if !strings.HasPrefix(all, head) || !strings.HasSuffix(all, tail) {
			t.Fatalf("the kept ends %q … %q are not the ends of %q", head, tail, all)
		}
		if got != head+cut.note+tail {
			t.Fatalf("got %q, want %q", got, head+cut.note+tail)
		}
	})
}
