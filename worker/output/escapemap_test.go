package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/protocol"
)

// sparseText is n bytes of 100-byte ASCII lines with now and then one of the
// things JSON escapes or UTF-8 treats specially: quotes, backslashes, runs of
// control bytes (some longer than escapePieceBytes), invalid and truncated
// sequences, U+2028/U+2029 and valid multi-byte runes.
func sparseText(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	specials := [][]byte{
		[]byte(`"`), []byte(`\`), []byte("\t\x03\x1f"), bytes.Repeat([]byte{3}, escapePieceBytes+5),
		{0xff}, {0xe2, 0x82}, {0xf0, 0x9f, 0x99}, []byte("\u2028"), []byte("\u2029x"), []byte("ü日🙂"),
	}
	out := make([]byte, 0, n)
	for len(out) < n {
		line := make([]byte, 99)
		for i := range line {
			line[i] = byte('a' + rng.IntN(26))
		}
		if rng.IntN(4) == 0 {
			at := rng.IntN(len(line))
			line = append(line[:at], append(bytes.Clone(specials[rng.IntN(len(specials))]), line[at:]...)...)
		}
		out = append(append(out, line...), '\n')
	}
	return out[:n]
}

// relayedResult writes data into a Buffer in pieces of writeStep, has
// the notifications' encoding see it in pieces of notifyStep (mapping it),
// and returns the result's JSON string and the buffer.
func relayedResult(t *testing.T, data []byte, writeStep, notifyStep int) (string, *Buffer) {
	t.Helper()
	b := &Buffer{blockSize: sizesForTest().block}
	for p := data; len(p) > 0; {
		n := min(writeStep, len(p))
		b.Write(p[:n])
		p = p[n:]
	}
	var c blockCursor
	for at := 0; at < len(data); at += notifyStep {
		n := min(notifyStep, len(data)-at)
		var scratch []byte
		chunk := &logChunk{stream: "stdout", chunk: b.take(&c, n), scratch: &scratch, escapes: &b.escapes, at: int64(at)}
		require.NoError(t, chunk.WriteJSON(io.Discard))
	}
	var out bytes.Buffer
	require.NoError(t, b.writeJSONString(&out))
	return out.String(), b
}

// The result written from the notifications' map is encoding/json's
// encoding, byte for byte, with every kind of special bytes, including
// those cut by a block's end (at 4096 bytes and each block after) or by a
// notification's.
func TestResultFromEscapeMapEncodesLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	block := sizesForTest().block
	base := sparseText(block+8192, 1)
	specials := [][]byte{
		[]byte("\u2028"), {0xe2, 0x82}, {0xf0, 0x9f, 0x99, 0x82}, {0xf0, 0x9f, 0x99}, []byte("\x03\x03\x03\x03\x03"),
		bytes.Repeat([]byte{3}, escapePieceBytes+3), []byte(`\"`), {0xff, 0xfe},
	}
	for i, special := range specials {
		t.Run(fmt.Sprint("special ", i), func(t *testing.T) {
			t.Parallel()
			// Each distinct shift once: for a short special, some coincide.
			shifts := []int{0, 1, len(special) / 2, len(special) - 1, len(special)}
			slices.Sort(shifts)
			for _, shift := range slices.Compact(shifts) {
				if shift > 4096 {
					continue
				}
				data := bytes.Clone(base)
				for _, end := range []int{4096, 4096 + block} {
					copy(data[end-shift:], special)
				}
				want := stdJSON(data)
				for _, notifyStep := range []int{4096 - shift, block / 4, len(data)} {
					got, b := relayedResult(t, data, 1000, max(notifyStep, 1000))
					require.Equal(t, want, got, "special %q shifted %d, notifications of %d", special, shift, notifyStep)
					assert.False(t, b.escapes.dropped, "the map describes the output")
				}
			}
		})
	}
	// Long verbatim runs (written to the host straight from the blocks),
	// multi-byte runes cut by blocks' ends among them.
	long := bytes.Repeat([]byte("abcdefgü日🙂"), (2*block+block/2)/15)
	for _, at := range []int{5, block / 25, block, 2*block - 97} {
		long[at] = '\n'
	}
	got, b := relayedResult(t, long, block/16, block/2)
	require.Equal(t, stdJSON(long), got)
	assert.False(t, b.escapes.dropped)
	for seed := range uint64(4) {
		data := sparseText(300_000+int(seed)*77, seed)
		got, b := relayedResult(t, data, 1+int(seed)*3001, 1+int(seed)*5003)
		require.Equal(t, stdJSON(data), got, "seed %d", seed)
		assert.False(t, b.escapes.dropped)
	}
}

// Dense escapes drop the map (bounded memory), and so does a gap in what
// the notifications encoded; the result is exact either way.
func TestEscapeMapDroppedWhenDenseOrIncomplete(t *testing.T) {
	t.Parallel()
	dense := bytes.Repeat([]byte("a\n"), 100_000)
	got, b := relayedResult(t, dense, 4096, 65536)
	assert.Equal(t, stdJSON(dense), got)
	assert.True(t, b.escapes.dropped, "a map as large as the output is not kept")
	assert.Nil(t, b.escapes.runs, "and its memory goes")

	data := sparseText(200_000, 9)
	b = &Buffer{}
	b.Write(data)
	var c blockCursor
	var scratch []byte
	first := &logChunk{stream: "stdout", chunk: b.take(&c, 50_000), scratch: &scratch, escapes: &b.escapes}
	require.NoError(t, first.WriteJSON(io.Discard))
	b.take(&c, 50_000) // a notification never encoded
	third := &logChunk{stream: "stdout", chunk: b.take(&c, 100_000), scratch: &scratch, escapes: &b.escapes, at: 100_000}
	require.NoError(t, third.WriteJSON(io.Discard))
	assert.True(t, b.escapes.dropped, "a gap drops the map")
	var out bytes.Buffer
	require.NoError(t, b.writeJSONString(&out))
	assert.Equal(t, stdJSON(data), out.String())
}

// failAfter fails every write after the first n bytes.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errors.New("host gone")
	}
	f.n -= len(p)
	return len(p), nil
}

// Through the relay: the notifications map the output as they go, the
// result reuses it and carries exactly the notifications' text; a
// notification that fails part way leaves the result exact.
func TestRelayResultReusesNotificationsEscapes(t *testing.T) {
	t.Parallel()
	for _, failing := range []bool{false, true} {
		t.Run(fmt.Sprint("failing=", failing), func(t *testing.T) {
			t.Parallel()
			// At least three notifications, each of many blocks.
			data := sparseText(2*maxLogChunkBytes+12345, 3)
			if testutil.Long() {
				data = sparseText(3<<20, 3)
			}
			var joined strings.Builder
			var r *Relay
			r = sizesForTest().relay(NewRelay(Limits{}, func(params any) error {
				c := params.(*logChunk)
				if failing && c.at > 0 && !r.out[0].escapes.dropped {
					// The host's pipe breaks part way through this one; the
					// test's host then takes it again, whole.
					require.Error(t, c.WriteJSON(&failAfter{n: 1000}))
				}
				var buf bytes.Buffer
				if err := c.WriteJSON(&buf); err != nil {
					return err
				}
				var got protocol.ExecuteLog
				if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
					return err
				}
				joined.WriteString(got.Chunk)
				return nil
			}))
			for p := data; len(p) > 0; {
				n := min(len(p), 7919)
				_, _ = r.Stream(0).Write(p[:n])
				p = p[n:]
			}
			r.Close()
			wantJSON := stdJSON(data)
			var want string
			require.NoError(t, json.Unmarshal([]byte(wantJSON), &want))
			assert.Equal(t, want, joined.String())
			if !failing {
				assert.False(t, r.out[0].escapes.dropped, "the notifications mapped the output")
				assert.EqualValues(t, len(data), r.out[0].escapes.covered)
			} else {
				assert.True(t, r.out[0].escapes.dropped, "a notification cut short breaks the map's continuity")
			}
			var result bytes.Buffer
			require.NoError(t, r.out[0].writeJSONString(&result))
			assert.Equal(t, wantJSON, result.String())
		})
	}
}

// A command printing a few lines costs its map a few bytes (a burst holds
// a thousand); a long output's map grows in pieces of at most escapeMapPiece.
func TestEscapeMapStartsSmall(t *testing.T) {
	t.Parallel()
	mapCap := func(m *escapeMap) (total, largest int) {
		for _, p := range m.runs {
			total += cap(p)
			largest = max(largest, cap(p))
		}
		return total, largest
	}
	small := []byte("total 8\n-rw-r--r-- 1 root root 6 \"a b\"\nok\n")
	got, b := relayedResult(t, small, len(small), len(small))
	require.Equal(t, stdJSON(small), got)
	total, _ := mapCap(&b.escapes)
	assert.LessOrEqual(t, total, 64)

	data := sparseText(3<<20, 5)
	got, b = relayedResult(t, data, 65536, 65536)
	require.Equal(t, stdJSON(data), got)
	total, largest := mapCap(&b.escapes)
	assert.LessOrEqual(t, largest, escapeMapPiece)
	assert.LessOrEqual(t, total, maxEscapeMapBytes(int64(len(data)))+escapeMapPiece)
}
