package sync

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

func mixedData(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]byte, 0, n)
	words := []string{"func ", "return ", "err ", "nil", "\n\t", "if ", "{", "}", "package sync\n"}
	for len(out) < n {
		if r.IntN(4) == 0 { // a stretch of random bytes
			chunk := make([]byte, r.IntN(200_000))
			for i := range chunk {
				chunk[i] = byte(r.Uint32())
			}
			out = append(out, chunk...)
			continue
		}
		for i := 0; i < 20_000; i++ {
			out = append(out, words[r.IntN(len(words))]...)
		}
	}
	return out[:n]
}

// Chunks compressed at different levels form one gzip stream that gzip and
// Go both read back exactly, whatever the level sequence.
func TestAdaptiveGzipRoundTrips(t *testing.T) {
	t.Parallel()
	data := mixedData(2<<20 + 12345)
	for name, pick := range map[string]func(n int) int{
		"store": func(int) int { return 0 },
		"cycle": func(n int) int { return n % len(gzipLadder) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			g := newAdaptiveGzip(&out, time.Now)
			g.ctl.force = pick
			// Odd write sizes cross chunk boundaries.
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 777_777)
				_, err := g.Write(rest[:n])
				require.NoError(t, err)
				rest = rest[n:]
			}
			require.NoError(t, g.Close())
			assert.Equal(t, int64(out.Len()), g.Written())
			zr, err := gzip.NewReader(bytes.NewReader(out.Bytes()))
			require.NoError(t, err)
			zr.Multistream(false)
			got, err := io.ReadAll(zr)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(data, got), "content differs")
			if _, err := exec.LookPath("gzip"); err == nil {
				cmd := exec.Command("gzip", "-dc")
				cmd.Stdin = bytes.NewReader(out.Bytes())
				got, err := cmd.Output()
				require.NoError(t, err)
				assert.True(t, bytes.Equal(data, got), "gzip -d reads it")
			}
		})
	}
	var out bytes.Buffer
	g := newAdaptiveGzip(&out, time.Now)
	require.NoError(t, g.Close())
	zr, err := gzip.NewReader(&out)
	require.NoError(t, err)
	got, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Empty(t, got, "an empty stream is valid")
}

// The controller stores when the consumer is fast (loopback) and compresses
// when the consumer sets the pace (a slow link).
func TestLevelControllerFollowsTheConsumer(t *testing.T) {
	const chunk = 1 << 20
	measured := [len(gzipLadder)]struct {
		nsPerByte, ratio float64
	}{{0.2, 1.0}, {2, 0.65}, {6, 0.35}, {30, 0.28}}
	run := func(consumerNsPerByte float64) int {
		c := newLevelController()
		counts := map[int]int{}
		for i := 0; i < 200; i++ {
			idx := c.pick()
			counts[idx]++
			m := measured[idx]
			compress := time.Duration(m.nsPerByte * chunk)
			out := int(m.ratio * chunk)
			drain := time.Duration(consumerNsPerByte * float64(out))
			waited := max(0, drain-compress)
			c.observe(idx, chunk, out, compress, waited)
		}
		best, most := 0, 0
		for idx, n := range counts {
			if n > most {
				best, most = idx, n
			}
		}
		return best
	}
	assert.Equal(t, 0, run(0.5), "1 GB/s+ consumer: store")
	assert.Equal(t, 2, run(40), "25 MB/s consumer: compress fast")
	assert.GreaterOrEqual(t, run(400), 2, "2.5 MB/s consumer: compress")
}

// slowConsumer takes nsPerByte of (fake) time for every byte written.
type slowConsumer struct {
	clock     *testutil.Clock // moved only by what is written
	nsPerByte float64
	n         int
}

func (s *slowConsumer) Write(p []byte) (int, error) {
	s.clock.Advance(time.Duration(s.nsPerByte * float64(len(p))))
	s.n += len(p)
	return len(p), nil
}

// Behind a slow link (the consumer sets the pace; compressing looks free on
// this clock) the stream ends up compressed; the content still round-trips.
func TestAdaptiveGzipCompressesForASlowConsumer(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("func main() { return nil }\n\tif err != nil {\n"), 200_000) // ~9 MB of text
	clock := testutil.NewClock(time.Unix(0, 0))
	var out bytes.Buffer
	consumer := &slowConsumer{clock: clock, nsPerByte: 50} // 20 MB/s
	g := newAdaptiveGzip(io.MultiWriter(consumer, &out), clock.Now)
	_, err := g.Write(data)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	assert.Less(t, float64(out.Len()), 0.2*float64(len(data)), "compressed to %d of %d", out.Len(), len(data))
	zr, err := gzip.NewReader(&out)
	require.NoError(t, err)
	got, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got))
}
