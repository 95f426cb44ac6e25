package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/protocol"
)

func TestLowUnitsIsALowerBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 500 {
		p := randomOutput(rng, rng.IntN(80))
		b := splitBlocks(rng, p)
		low := lowUnits(p)
		assert.LessOrEqual(t, low+2, b.jsonUnits(), "case %d: %q", i, p)
		want := int64(0)
		for _, c := range p {
			if c&0xC0 != 0x80 {
				want++
			}
		}
		assert.Equal(t, want, low, "case %d: the bytes that are no continuation bytes", i)
	}
}

// testSizes are the block size and pending bound of the relays and
// buffers of the heaviest tests. make test runs them small: the same logic
// meets as many blocks for a sixteenth of the bytes (copies are slow under
// the race detector). make test-long runs them at the worker's own sizes.
type testSizes struct{ block, pending int }

func sizesForTest() testSizes {
	if testutil.Long() {
		return testSizes{block: outputBlockSize, pending: maxPendingLogBytes}
	}
	return testSizes{block: 64 << 10, pending: 512 << 10}
}

// relay gives r these sizes; call it before the first write.
func (z testSizes) relay(r *Relay) *Relay {
	r.maxPending = z.pending
	for i := range r.out {
		r.out[i].blockSize = z.block
	}
	return r
}

// relayOutput sends data through a relay of sizesForTest whose result is
// limited to limit units, 64 KiB at a time, and returns the relay (closed)
// and, when decode is set, what its execute.log notifications carried. The
// notifications are encoded either way (the encoding maps the output's
// escapes); decoding them back is most of the work under the race
// detector, so a test that does not look at them skips it.
func relayOutput(t *testing.T, limit int64, data []byte, decode bool) (*Relay, string) {
	t.Helper()
	var mu sync.Mutex
	var streamed strings.Builder
	r := sizesForTest().relay(NewRelay(Limits{Result: limit}, func(params any) error {
		if !decode {
			return params.(*logChunk).WriteJSON(io.Discard)
		}
		var buf bytes.Buffer
		if err := params.(*logChunk).WriteJSON(&buf); err != nil {
			return err
		}
		var got protocol.ExecuteLog
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		streamed.WriteString(got.Chunk)
		return nil
	}))
	w := r.Stream(0)
	for p := data; len(p) > 0; {
		n := min(len(p), 64<<10)
		_, _ = w.Write(p[:n])
		p = p[n:]
	}
	r.Close()
	return r, streamed.String()
}

// decodeAsResult is how the host reads bytes of output in a result.
func decodeAsResult(t *testing.T, p []byte) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal([]byte(encodeCut(t, Text(string(p)), outputCut{})), &s))
	return s
}

func TestTrimMiddleHoldsWhatTheResultCanCarry(t *testing.T) {
	t.Parallel()
	z := sizesForTest()
	// A limit of a few blocks, so that what is kept at each end matters.
	limit := int64(4 * z.block)
	// Outputs well past what a trimmed relay may hold (the limit, a few
	// blocks and a batch in flight).
	big := int(limit) + 6*z.block + z.pending + 6*z.block
	lines := func(size int) []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "line %07d of a command that does not stop printing\n", i)
		}
		return b.Bytes()
	}
	wide := func(size int) []byte {
		return bytes.Repeat([]byte("中文字符输出😀\n"), size/30)
	}
	mixed := func(size int) []byte {
		rng := rand.New(rand.NewPCG(7, 8))
		var b bytes.Buffer
		for b.Len() < size {
			b.Write(randomOutput(rng, 100))
		}
		return b.Bytes()
	}
	tests := []struct {
		name    string
		data    []byte
		trimmed bool
	}{
		{name: "lines", data: lines(big), trimmed: true},
		{name: "wide characters", data: wide(big), trimmed: true},
		{name: "ill-formed and escaped", data: mixed(big), trimmed: true},
		// Three bytes a character: more bytes than the limit, fewer
		// characters, so it fits whole and nothing may be dropped.
		{name: "wide characters that fit", data: bytes.Repeat([]byte("中文字符"), int(3*limit/4)/4), trimmed: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, streamed := relayOutput(t, limit, tt.data, true)
			b := &r.out[0]
			whole := decodeAsResult(t, tt.data)
			assert.Equal(t, whole, streamed, "execute.log carried all of it")
			require.Equal(t, tt.trimmed, b.holed(), "the middle is dropped")
			if tt.trimmed {
				assert.True(t, b.escapes.dropped, "the escape map, which grows with the output, is dropped too")
			}
			assert.Equal(t, int64(len(tt.data)), b.Len())
			held := 0
			for _, blk := range b.blocks {
				held += len(blk)
			}
			if tt.trimmed {
				// The kept start and end (a few 1 MiB blocks), and the
				// last batch relayed, at most maxPendingLogBytes.
				assert.Less(t, held, int(limit)+6*z.block+z.pending, "held of %d", len(tt.data))
			} else {
				assert.Equal(t, len(tt.data), held)
			}

			res := &Result{ExitCode: intPtr(0), Stdout: b, Stderr: Text("done\n"), MaxLineChars: limit}
			var line bytes.Buffer
			require.NoError(t, res.WriteJSON(&line))
			// The same output held whole makes the same result: what was
			// dropped is what the cut leaves out anyway.
			untrimmed, _ := relayOutput(t, 0, tt.data, false)
			require.False(t, untrimmed.out[0].holed())
			wholeRes := &Result{ExitCode: intPtr(0), Stdout: &untrimmed.out[0], Stderr: Text("done\n"), MaxLineChars: limit}
			var wholeLine bytes.Buffer
			require.NoError(t, wholeRes.WriteJSON(&wholeLine))
			assert.True(t, bytes.Equal(wholeLine.Bytes(), line.Bytes()), "the result is the one the whole output makes")
			assert.LessOrEqual(t, jsUnits(line.String()), int64(limit-envelopeReserve), "the result fits the host's line")
			var got protocol.ExecuteResult
			require.NoError(t, json.Unmarshal(line.Bytes(), &got))
			assert.Equal(t, "done\n", got.Stderr)
			if !tt.trimmed {
				assert.Equal(t, whole, got.Stdout)
				return
			}
			// The cut WriteJSON made, planned again as it plans it.
			fixed := int64(len(`{"exitCode":0,"timedOut":false,"stdout":`) + len(`,"stderr":`) + len("}") + envelopeReserve)
			cut, errCut := fitOutputs(b, Text("done\n"), limit-fixed, limit)
			require.True(t, errCut.whole())
			require.False(t, cut.whole())
			head, tail := decodeAsResult(t, tt.data[:cut.head]), decodeAsResult(t, tt.data[cut.tail:])
			assert.Equal(t, head+cut.note+tail, got.Stdout, "the start, a note, the end")
			assert.True(t, strings.HasPrefix(whole, head), "the start is the output's")
			assert.True(t, strings.HasSuffix(whole, tail), "the end is the output's")
			assert.Contains(t, cut.note, fmt.Sprintf("[daytona-worker: %d bytes of stdout left out here", cut.tail-cut.head))
			hs, he := b.holeSpan()
			assert.LessOrEqual(t, cut.head, hs, "the start is from the blocks kept before the hole")
			assert.GreaterOrEqual(t, cut.tail, he, "the end is from the blocks kept after it")
			assert.Greater(t, jsUnits(got.Stdout), int64(limit/4), "the room is used")
		})
	}
}

// A stream sure to be cut holds its start and its end only: the relayed
// middle is let go as it is sent.
func TestTrimMiddleLetsTheMiddleGo(t *testing.T) {
	t.Parallel()
	// Well past what it may hold (a few blocks and a batch in flight).
	z := sizesForTest()
	size := 32 * z.block
	if testutil.Long() {
		size = 96 * z.block
	}
	data := bytes.Repeat([]byte(strings.Repeat("x", 99)+"\n"), size/100)
	r, _ := relayOutput(t, int64(z.block), data, false)
	require.True(t, r.out[0].holed())
	held := 0
	for _, blk := range r.out[0].blocks {
		held += cap(blk)
	}
	// The kept start and end, and the last batch (up to the pending bound),
	// which the relay's close sends without trimming after it.
	assert.LessOrEqual(t, held, z.pending+6*z.block, "the dropped middle is not held")
}

// TestTailFromStartsOnACharacter: the hole may end inside a character (the
// blocks are cut by size); the kept end then starts after its remains.
func TestTailFromStartsOnACharacter(t *testing.T) {
	b := &Buffer{blocks: [][]byte{[]byte("start\xe4"), nil, []byte("\xb8\xadend")}, n: 6 + 100 + 6}
	b.trim = middleTrim{from: 1, to: 2, bytes: 100}
	start, end := b.holeSpan()
	assert.Equal(t, int64(6), start)
	assert.Equal(t, int64(106), end)
	assert.Equal(t, int64(108), b.tailFrom(end, 1000), "after the two continuation bytes")
	assert.Equal(t, int64(110), b.tailFrom(end, 1), "one unit: the last byte")
	c := b.cursorAt(50)
	assert.Equal(t, blockCursor{blk: 2}, c, "an offset in the hole is the first byte after it")
	c = b.cursorAt(108)
	assert.Equal(t, []byte("end"), b.next(&c, 10))
}

func TestTextUnitsCountWhatTheHostDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 300 {
		p := randomOutput(rng, rng.IntN(60))
		b := splitBlocks(rng, p)
		assert.Equal(t, jsUnits(decodeAsResult(t, p)), textUnits(b, b.n), "case %d: %q", i, p)
	}
}

// TestLogCapSendsOnlyWhatTheHostTakes: the host sums the characters of the
// execute.log chunks it takes and drops a chunk that would take the sum
// past its bound (a later, smaller one may still fit); the relay sends just
// those chunks, counting nothing until the bytes sent near the bound.
func TestLogCapSendsOnlyWhatTheHostTakes(t *testing.T) {
	const limit = 1000
	type chunk struct {
		stream int
		text   string
	}
	chunks := []chunk{
		{0, strings.Repeat("a", 600)},   // 600 units, taken unread
		{1, strings.Repeat("中", 100)},   // 300 bytes, 100 units: 900 bytes in all
		{0, strings.Repeat("é", 225)},   // 450 bytes: counted from here, 700 + 225 units
		{0, strings.Repeat("b", 100)},   // 1025: dropped
		{1, strings.Repeat("😀", 15)},    // 30 units: 955
		{0, strings.Repeat("c", 50)},    // 1005: dropped
		{0, strings.Repeat("\x01", 45)}, // 45 units (six bytes of JSON each): 1000
		{1, "d"},                        // 1001: dropped
	}
	// What the host does with them all.
	var want []chunk
	var took int64
	for _, c := range chunks {
		if u := jsUnits(c.text); took+u <= limit {
			took += u
			want = append(want, c)
		}
	}
	var got []chunk
	r := NewRelay(Limits{Streamed: limit}, func(params any) error {
		var buf bytes.Buffer
		if err := params.(*logChunk).WriteJSON(&buf); err != nil {
			return err
		}
		var l protocol.ExecuteLog
		require.NoError(t, json.Unmarshal(buf.Bytes(), &l))
		got = append(got, chunk{map[string]int{"stdout": 0, "stderr": 1}[l.Stream], l.Chunk})
		return nil
	})
	for _, c := range chunks {
		// As the sender sees it: the output collected, then handed over.
		_, _ = r.out[c.stream].Write([]byte(c.text))
		require.NoError(t, r.deliver(c.stream, [][]byte{[]byte(c.text)}))
	}
	assert.Equal(t, want, got)
	assert.Len(t, got, 5)
}

// TestTrimMiddleMovesARelayCursorOffADroppedBlock: the relay's cursor rests
// at the end of the last block it took; when that block is dropped (it has
// all been sent), the next take must go on from the block after it. It
// used to keep the dropped block's end offset and panic on the nil block
// (CI, stop 23: slice bounds out of range [1048576:0:]).
func TestTrimMiddleMovesARelayCursorOffADroppedBlock(t *testing.T) {
	t.Parallel()
	const limit = 2 << 20
	block := func(i int) []byte { return bytes.Repeat([]byte{'a' + byte(i)}, outputBlockSize) }
	tests := []struct {
		name   string
		sent   blockCursor // where the relay's cursor rests
		want   blockCursor // where it rests after the trim
		holed  bool
		remain int // bytes a take from the cursor returns
	}{
		{name: "at the end of a dropped block", sent: blockCursor{blk: 5, off: outputBlockSize}, want: blockCursor{blk: 6}, holed: true, remain: 4 * outputBlockSize},
		{name: "inside a block that stays", sent: blockCursor{blk: 5, off: 10}, want: blockCursor{blk: 5, off: 10}, holed: true, remain: 5*outputBlockSize - 10},
		{name: "in the kept start", sent: blockCursor{blk: 1, off: outputBlockSize}, want: blockCursor{blk: 1, off: outputBlockSize}, holed: false, remain: 8 * outputBlockSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b Buffer
			for i := range 10 {
				_, _ = b.Write(block(i))
			}
			c := tt.sent
			b.trimMiddle(&c, limit)
			require.Equal(t, tt.holed, b.holed())
			assert.Equal(t, tt.want, c)
			// More output, then the relay takes on from its cursor.
			_, _ = b.Write([]byte("end\n"))
			got := 0
			for _, p := range b.take(&c, int(b.Len())) {
				got += len(p)
			}
			assert.Equal(t, tt.remain+len("end\n"), got)
		})
	}
}

// TestTrimMiddleKeepsTheRelaysTakesWhole plays writes, takes and trims in
// random order and sizes (many of them whole blocks, so that takes end on a
// block's end), as the relay's writer and sender interleave: every byte
// written is taken exactly once, in order, whatever was dropped meanwhile.
// make test plays a few seeds, make test-long more.
func TestTrimMiddleKeepsTheRelaysTakesWhole(t *testing.T) {
	t.Parallel()
	// The output is a pattern whose every byte says where it is (mod 251,
	// a prime, so that no block size repeats it).
	pattern := make([]byte, 251+3*outputBlockSize)
	for i := range pattern {
		pattern[i] = byte(i % 251)
	}
	at := func(off int64, n int) []byte { s := off % 251; return pattern[s : s+int64(n)] }
	holed := 0
	seeds := testutil.Seeds(4, 40)
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 77))
		var b Buffer
		size := func() int {
			switch rng.IntN(5) {
			case 4:
				// Up to the end of the block being written.
				if k := len(b.blocks); k > 0 && len(b.blocks[k-1]) < cap(b.blocks[k-1]) {
					return cap(b.blocks[k-1]) - len(b.blocks[k-1])
				}
				return outputBlockSize
			case 0:
				return outputBlockSize * (1 + rng.IntN(2))
			case 1:
				return 64 << 10
			default:
				return 1 + rng.IntN(3*outputBlockSize/2)
			}
		}
		limit := int64(1+rng.IntN(4)) << 20
		var c blockCursor
		var written, taken int64
		takeUpTo := func(n int64) {
			for _, piece := range b.take(&c, int(n)) {
				if !bytes.Equal(at(taken, len(piece)), piece) {
					require.Failf(t, "out of order", "seed %d: the %d bytes taken at %d are not the output's", seed, len(piece), taken)
				}
				taken += int64(len(piece))
			}
		}
		for range 60 {
			n := size()
			_, _ = b.Write(at(written, n))
			written += int64(n)
			if rng.IntN(3) == 0 {
				continue // the sender is behind
			}
			want := written - taken
			switch rng.IntN(3) {
			case 0:
				want = rng.Int64N(want + 1)
			case 1:
				// Up to the end of a block before the last, as a batch that
				// lags the writes may end.
				if k := len(b.blocks) - 1; k > c.blk {
					end := c.blk + rng.IntN(k-c.blk)
					want = int64(len(b.blocks[c.blk]) - c.off)
					for _, blk := range b.blocks[c.blk+1 : end+1] {
						want += int64(len(blk))
					}
				}
			}
			before := taken
			takeUpTo(want)
			require.Equal(t, want, taken-before, "seed %d: a take returns what was asked", seed)
			b.trimMiddle(&c, limit)
		}
		takeUpTo(written - taken)
		assert.Equal(t, written, taken, "seed %d: everything taken once", seed)
		if b.holed() {
			holed++
		}
	}
	assert.Greater(t, holed, seeds/2, "most plays drop a middle")
}

// TestLogCapCountsBeforeTheMiddleIsDropped: a command that prints faster
// than the host reads can take a stream past the result limit while the
// bytes sent are still under the streamed bound. The relay then drops the
// middle it has sent, so it must count those bytes first, or it can no
// longer tell what the host took and would send all the rest (CI, once:
// 140 MB streamed of a 128 Mi bound).
func TestLogCapCountsBeforeTheMiddleIsDropped(t *testing.T) {
	t.Parallel()
	const limit = 8 << 20
	started, release := make(chan struct{}), make(chan struct{})
	var calls int
	var streamed int64
	r := NewRelay(Limits{Result: limit, Streamed: limit}, func(params any) error {
		if calls++; calls == 1 {
			close(started)
			<-release // the sender waits on the host while the command prints on
		}
		streamed += int64(runLen(params.(*logChunk).chunk))
		return nil
	})
	w := r.Stream(0)
	_, _ = w.Write(bytes.Repeat([]byte("a"), 7<<20)) // under the bound: sent uncounted
	<-started
	_, _ = w.Write(bytes.Repeat([]byte("b"), 13<<20)) // the stream passes the result limit
	close(release)
	r.Close()
	assert.True(t, r.Output(0).holed(), "the relayed middle was dropped")
	assert.LessOrEqual(t, streamed, int64(limit), "nothing past what the host takes")
	assert.Greater(t, streamed, int64(limit-maxLogChunkBytes), "all the host takes")
}
