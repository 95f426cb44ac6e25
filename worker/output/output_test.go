package output

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/utf8text"
	"github.com/paperclipai/daytona-worker/protocol"
)

// encodeBlocks writes data through a Buffer fed in pieces of size step.
func encodeBlocks(t testing.TB, data []byte, step int) string {
	var b Buffer
	for len(data) > 0 {
		n := min(step, len(data))
		b.Write(data[:n])
		data = data[n:]
	}
	var out bytes.Buffer
	require.NoError(t, b.writeJSONString(&out))
	return out.String()
}

// stdJSON is how s is expected to be encoded: as encoding/json does without
// HTML escaping, but with one \ufffd per maximal subpart of ill-formed UTF-8,
// as Node decodes, where encoding/json puts one per byte.
func stdJSON(s []byte) string {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(oneBytePerSubpart(s)))
	return strings.TrimSuffix(out.String(), "\n")
}

// oneBytePerSubpart reduces each maximal subpart of an ill-formed sequence
// in s to one invalid byte.
func oneBytePerSubpart(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		if r, size := utf8.DecodeRune(s[i:]); r != utf8.RuneError || size > 1 {
			out = append(out, s[i:i+size]...)
			i += size
			continue
		}
		n, _ := utf8text.IllFormed(s[i:])
		out = append(out, 0xff)
		i += n
	}
	return out
}

func TestBlockBufferEncodesLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	samples := [][]byte{
		nil, []byte("plain"), []byte("quote\" back\\ nl\n cr\r tab\t bell\a nul\x00"),
		[]byte("ü 日本 🙂 \u2028\u2029 <&>"), []byte("bad \xff\xfe utf8 \xe2\x82 cut"), []byte("\xf0\x9f\x99"),
		bytes.Repeat([]byte("ab日🙂"), 200_000),
		randomBytes(300_000), // invalid sequences across every cut
	}
	for _, s := range samples {
		want := stdJSON(s)
		for _, step := range []int{1, 2, 3, 7, 4096, outputBlockSize + 1} {
			assert.Equal(t, want, encodeBlocks(t, s, step), "sample %.40q step %d", s, step)
		}
	}
}

func FuzzBlockBufferJSON(f *testing.F) {
	f.Add([]byte("hello"), 3)
	f.Add([]byte("ü日🙂\xff"), 1)
	f.Fuzz(func(t *testing.T, data []byte, step int) {
		if step <= 0 || step > 1<<16 {
			step = 1 + step&0xff
		}
		if got, want := encodeBlocks(t, data, step), stdJSON(data); got != want {
			t.Fatalf("got %q want %q", got, want)
		}
	})
}

func TestIncompleteTail(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{
		"": 0, "a": 0, "ü": 0, "\xc3": 1, "a\xe6\x97": 2, "\xf0\x9f\x99": 3, "🙂": 0, "\x80": 0, "a\xff": 0,
	} {
		assert.Equal(t, want, incompleteTail([]byte(in)), "%q", in)
	}
}

// recorder collects relayed notifications.
// newStringRelay relays to send, one string per chunk.
func newStringRelay(send func(stream, chunk string) error) *Relay {
	return startLogRelay(func(stream int, chunk [][]byte) error {
		var b strings.Builder
		b.Grow(runLen(chunk))
		for _, p := range chunk {
			b.Write(p)
		}
		return send(StreamName(stream), b.String())
	})
}

type recorder struct {
	mu     sync.Mutex
	chunks []struct{ stream, chunk string }
}

func (r *recorder) send(stream, chunk string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks = append(r.chunks, struct{ stream, chunk string }{stream, chunk})
	return nil
}

func (r *recorder) joined(stream string) string {
	var b strings.Builder
	for _, c := range r.chunks {
		if c.stream == stream {
			b.WriteString(c.chunk)
		}
	}
	return b.String()
}

func TestRelayForwardsEveryByteOnceOnRuneBoundaries(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	r := newStringRelay(rec.send)
	out, errw := r.Stream(0), r.Stream(1)
	text := strings.Repeat("line ü日🙂\n", 150_000) // multi-byte runes, ~2.7 MB
	data := []byte(text)
	// Feed in odd-sized pieces so runes are split across writes.
	for i, step := 0, 0; i < len(data); i += step {
		step = 1 + (i*7919)%5000
		end := min(i+step, len(data))
		_, _ = out.Write(data[i:end])
		if i%3 == 0 {
			_, _ = errw.Write([]byte("e"))
		}
	}
	r.Close()
	assert.Equal(t, text, rec.joined("stdout"))
	assert.Equal(t, r.out[0].String(), text, "the result holds the same bytes")
	assert.Equal(t, int(r.out[1].Len()), len(rec.joined("stderr")))
	for _, c := range rec.chunks {
		assert.NotEmpty(t, c.chunk)
		assert.LessOrEqual(t, len(c.chunk), maxLogChunkBytes)
		assert.True(t, utf8.ValidString(c.chunk), "chunks end on rune boundaries")
	}
}

func TestRelayKeepsStreamOrderAndFlushesATrailingPartialRune(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	r := newStringRelay(rec.send)
	_, _ = r.Stream(0).Write([]byte("a"))
	_, _ = r.Stream(1).Write([]byte("b"))
	_, _ = r.Stream(0).Write([]byte("c\xe6\x97"))
	r.Close()
	assert.Equal(t, "ac\xe6\x97", rec.joined("stdout"), "an incomplete rune at the end still goes out")
	assert.Equal(t, "b", rec.joined("stderr"))
}

func TestRelayAppliesBackpressure(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var sent int
	var mu sync.Mutex
	r := newStringRelay(func(stream, chunk string) error {
		<-release
		mu.Lock()
		sent += len(chunk)
		mu.Unlock()
		return nil
	})
	// The stuck sender holds at most one batch (up to the pending bound), so
	// writing more than twice the bound must block the writer.
	const total = 2*maxPendingLogBytes + 4<<20
	done := make(chan struct{})
	go func() {
		defer close(done)
		block := bytes.Repeat([]byte("x"), 1<<20)
		for i := 0; i < total>>20; i++ {
			_, _ = r.Stream(0).Write(block)
		}
	}()
	// With the sender stuck, the writer must stop once the pending bound is
	// reached rather than buffer everything.
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.bytes >= maxPendingLogBytes
	}, 30*time.Second, time.Millisecond, "the pending bound is never reached")
	select {
	case <-done:
		t.Fatal("writer was not held back")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-done
	r.Close()
	assert.Equal(t, total, sent)
}

func TestJSONStringCarryThatTurnsOutInvalid(t *testing.T) {
	t.Parallel()
	// A held partial rune (e6 97) followed by a write starting with another
	// rune (e2 80 a9): the held bytes are invalid, the next rune survives.
	var out bytes.Buffer
	e := jsonStringWriter{w: &out}
	require.NoError(t, e.write([]byte{0xe6, 0x97}))
	require.NoError(t, e.write([]byte{0xe2, 0x80, 0xa9, 'x'}))
	require.NoError(t, e.finish())
	require.NoError(t, e.flush())
	assert.Equal(t, strings.Trim(stdJSON([]byte{0xe6, 0x97, 0xe2, 0x80, 0xa9, 'x'}), `"`), out.String())
}

func TestLogChunkEncodesAsExecuteLog(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain\n", "ü日🙂 \u2028 \"q\" \\ \t\x01", "bad \xff end"} {
		var scratch []byte
		c := &logChunk{stream: "stderr", chunk: [][]byte{[]byte(s[:len(s)/2]), []byte(s[len(s)/2:])}, scratch: &scratch}
		var got bytes.Buffer
		require.NoError(t, c.WriteJSON(&got))
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(protocol.ExecuteLog{Stream: "stderr", Chunk: s}))
		assert.Equal(t, strings.TrimSuffix(want.String(), "\n"), got.String(), "%q", s)
	}
}

func TestRelayHoldsOutputOnceWhateverItsEscaping(t *testing.T) {
	t.Parallel()
	// NUL bytes escape to six bytes each (\u0000): the relay keeps the raw
	// output (escaping only on the way out), so binary output costs its own
	// size in memory, not six times it; every notification still decodes to
	// the input and stays within the host's limit.
	data := bytes.Repeat([]byte("\x00\x01ü\n"), 200_000) // 1 MB
	var mu sync.Mutex
	var joined strings.Builder
	chunks := 0
	r := NewRelay(Limits{}, func(params any) error {
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
		assert.Less(t, len(utf16.Encode([]rune(got.Chunk))), 1_000_000, "a chunk within the host's limit")
		joined.WriteString(got.Chunk)
		chunks++
		return nil
	})
	_, _ = r.Stream(0).Write(data)
	r.Close()
	assert.Equal(t, string(data), joined.String())
	held := 0
	for _, blk := range r.out[0].blocks {
		held += cap(blk)
	}
	assert.LessOrEqual(t, held, len(data)+outputBlockSize, "output is held raw, once")
	var result bytes.Buffer
	require.NoError(t, r.out[0].writeJSONString(&result))
	assert.Equal(t, stdJSON(data), result.String(), "the result holds the same text")
}

// randomBytes is n reproducible pseudo-random bytes, weighted towards UTF-8
// lead and continuation bytes so that valid, truncated and overlong runs mix.
func randomBytes(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([]byte, n)
	for i := range out {
		switch rng.IntN(4) {
		case 0:
			out[i] = byte(0x80 + rng.IntN(0x40)) // continuation
		case 1:
			out[i] = byte(0xC0 + rng.IntN(0x38)) // lead
		default:
			out[i] = byte(rng.IntN(256))
		}
	}
	return out
}

// A command that prints nothing costs the relay no sender goroutine and
// the host no notification.
func TestRelayWithoutOutputStartsNoSender(t *testing.T) {
	t.Parallel()
	delivered := 0
	r := startLogRelay(func(int, [][]byte) error { delivered++; return nil })
	r.Close()
	assert.False(t, r.sending)
	assert.Zero(t, delivered)
	_, _ = r.Stream(0).Write([]byte("late")) // after close: kept, not sent
	assert.Zero(t, delivered)
	assert.EqualValues(t, 4, r.out[0].Len())
}

// Output of many blocks, written in pieces that straddle them, reads back
// byte for byte; no block is larger than outputBlockSize.
func TestBlockBufferHoldsLargeOutputExactly(t *testing.T) {
	t.Parallel()
	var b Buffer
	var want bytes.Buffer
	chunk := make([]byte, 100_003)
	for i := 0; want.Len() < 8*outputBlockSize+12345; i++ {
		for j := range chunk {
			chunk[j] = byte(i*7 + j)
		}
		_, _ = b.Write(chunk)
		want.Write(chunk)
	}
	assert.EqualValues(t, want.Len(), b.Len())
	assert.True(t, bytes.Equal(want.Bytes(), []byte(b.String())), "contents differ")
	for _, blk := range b.blocks {
		assert.LessOrEqual(t, cap(blk), outputBlockSize)
	}
}

// wordNeedsEscape and plainPrefix against the byte-by-byte rule they speed up:
// every byte value at every position of a word and of a 32-byte stride, and
// random words.
func TestPlainPrefixFindsEveryByteToEscape(t *testing.T) {
	t.Parallel()
	plain := func(c byte) bool { return c < utf8.RuneSelf && jsonPlain[c] }
	naive := func(p []byte) int {
		for i, c := range p {
			if !plain(c) {
				return i
			}
		}
		return len(p)
	}
	buf := bytes.Repeat([]byte("a"), 80)
	for c := range 256 {
		for pos := range 40 {
			p := bytes.Clone(buf)
			p[pos] = byte(c)
			require.Equal(t, naive(p), plainPrefix(p), "byte %#x at %d", c, pos)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var word [8]byte
	for range 200_000 {
		for i := range word {
			// Mostly plain bytes, now and then one of each kind of the others.
			switch rng.IntN(12) {
			case 0:
				word[i] = byte(rng.IntN(0x20))
			case 1:
				word[i] = byte(0x80 + rng.IntN(0x80))
			case 2:
				word[i] = `"\`[rng.IntN(2)]
			default:
				word[i] = byte(0x20 + rng.IntN(0x60))
			}
		}
		want := naive(word[:]) < len(word)
		require.Equal(t, want, wordNeedsEscape(binary.LittleEndian.Uint64(word[:])), "%q", word)
	}
}

// Ill-formed UTF-8 becomes one U+FFFD per maximal subpart, as the plugin's
// output shows (Node's TextDecoder; the expectations are what Node 20
// gives), however the output is cut: in the result, written in pieces,
// and in the execute.log chunks, whose joined text is the same.
func TestIllFormedUTF8ReplacedAsNodeDecodes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"A\xe2\x82xB", "A\ufffdxB"},               // a 3-byte sequence cut short
		{"I\xf0\x9f\x98J", "I\ufffdJ"},             // a 4-byte sequence cut short
		{"end\xe2\x82", "end\ufffd"},               // cut short by the output's end
		{"C\xed\xa0\x80D", "C\ufffd\ufffd\ufffdD"}, // a surrogate: ED takes 80-9F only
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"},     // E0 takes A0-BF only
		{"\xf0\x8f\xbf\xbf", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xf4\x8f\xbf", "\ufffd"},
		{"\xc0\xaf\xc1\xbf\xf5\x80", "\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd"},
		{"\xe2\x82\xe2\x82\xac", "\ufffd€"}, // a cut-short start, then a whole rune
		{"\xf0\x9f\x98\xf0\x9f\x98\x80", "\ufffd😀"},
		{"\xe6\x97\xe2\x80\xa9x", "\ufffd\u2029x"},
		{"\x80\xbf\"\xc3", "\ufffd\ufffd\"\ufffd"},
		{"ok \xef\xbf\xbd ü日🙂", "ok \ufffd ü日🙂"},
	} {
		in := []byte(tt.in)
		// Every cut into up to three pieces.
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j++ {
				pieces := [][]byte{in[:i], in[i:j], in[j:]}

				var out bytes.Buffer
				e := jsonStringWriter{w: &out}
				for _, p := range pieces {
					require.NoError(t, e.write(p))
				}
				require.NoError(t, e.finish())
				require.NoError(t, e.flush())
				var got string
				require.NoError(t, json.Unmarshal([]byte(`"`+out.String()+`"`), &got), "%q", out.String())
				assert.Equal(t, tt.want, got, "result of %q cut at %d, %d", tt.in, i, j)

				var joined strings.Builder
				r := NewRelay(Limits{}, func(params any) error {
					var buf bytes.Buffer
					require.NoError(t, params.(*logChunk).WriteJSON(&buf))
					var got protocol.ExecuteLog
					require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
					joined.WriteString(got.Chunk)
					return nil
				})
				// Each piece as the sender forwards a segment, then the end.
				for _, p := range pieces {
					r.forward(0, [][]byte{p}, false)
				}
				r.forward(0, nil, true)
				assert.Equal(t, tt.want, joined.String(), "execute.log of %q cut at %d, %d", tt.in, i, j)
			}
		}
		var b Buffer
		b.Write(in)
		var out bytes.Buffer
		require.NoError(t, b.writeJSONString(&out))
		var got string
		require.NoError(t, json.Unmarshal(out.Bytes(), &got))
		assert.Equal(t, tt.want, got, "result of %q", tt.in)
	}
}

// A host whose line limit was lowered (DAYTONA_WORKER_MAX_MESSAGE_CHARS)
// reads no execute.log line longer than it: the chunks shrink to fit, the
// worst case being bytes that each escape to six characters.
func TestLogChunksFitALoweredLineLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	data := bytes.Repeat([]byte("\x00\x01ü\n"), 100_000)
	var mu sync.Mutex
	var joined strings.Builder
	longest := 0
	r := NewRelay(Limits{Result: limit}, func(params any) error {
		// The whole line as rpc writes it, with an invocation id.
		var buf bytes.Buffer
		buf.WriteString(`{"jsonrpc":"2.0","method":"execute.log","params":`)
		if err := params.(*logChunk).WriteJSON(&buf); err != nil {
			return err
		}
		buf.WriteString(`,"paperclipInvocationId":"0b7a1c9e-1111-4222-8333-944455556666"}`)
		line := buf.Bytes()
		var got struct{ Params protocol.ExecuteLog }
		if err := json.Unmarshal(line, &got); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		longest = max(longest, len(utf16.Encode([]rune(string(line)))))
		joined.WriteString(got.Params.Chunk)
		return nil
	})
	_, _ = r.Stream(0).Write(data)
	r.Close()
	assert.Equal(t, string(data), joined.String(), "all of it, in order")
	assert.LessOrEqual(t, longest, limit, "no notification longer than the host reads")
	assert.Equal(t, maxLogChunkBytes, chunkBytesFor(0), "the host's own limit keeps the chunk bound")
	assert.Equal(t, maxLogChunkBytes, chunkBytesFor(134217728))
}
