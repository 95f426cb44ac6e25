package emulator

import (
	"bytes"
	"math/rand/v2"
	"sync"
)

// FrameSplitter cuts one chunk of session-log bytes into the payloads of
// consecutive WebSocket frames. The payloads, concatenated, must equal chunk.
// It may be called from several goroutines at once.
type FrameSplitter func(chunk []byte) [][]byte

// SplitEvery cuts chunks into frames of at most n bytes.
func SplitEvery(n int) FrameSplitter {
	if n < 1 {
		n = 1
	}
	return func(chunk []byte) [][]byte {
		var out [][]byte
		for len(chunk) > n {
			out = append(out, chunk[:n])
			chunk = chunk[n:]
		}
		if len(chunk) > 0 {
			out = append(out, chunk)
		}
		return out
	}
}

// SplitInsideMarkers cuts every stdout/stderr marker (\x01\x01\x01,
// \x02\x02\x02) found in a chunk into three frames, one byte each, so a client
// demuxer must carry partial markers across frames.
func SplitInsideMarkers() FrameSplitter {
	return func(chunk []byte) [][]byte {
		var out [][]byte
		start := 0
		for i := 0; i+len(stdoutMarker) <= len(chunk); i++ {
			m := chunk[i : i+len(stdoutMarker)]
			if !bytes.Equal(m, stdoutMarker) && !bytes.Equal(m, stderrMarker) {
				continue
			}
			for _, cut := range []int{i + 1, i + 2} {
				if cut > start {
					out = append(out, chunk[start:cut])
					start = cut
				}
			}
			i += len(stdoutMarker) - 1
		}
		if start < len(chunk) {
			out = append(out, chunk[start:])
		}
		return out
	}
}

// SplitRandom cuts chunks at pseudo-random offsets (frames of 1..max bytes),
// reproducibly for a given seed.
func SplitRandom(seed uint64, max int) FrameSplitter {
	if max < 1 {
		max = 1
	}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(chunk []byte) [][]byte {
		mu.Lock()
		defer mu.Unlock()
		var out [][]byte
		for len(chunk) > 0 {
			n := 1 + rng.IntN(max)
			if n > len(chunk) {
				n = len(chunk)
			}
			out = append(out, chunk[:n])
			chunk = chunk[n:]
		}
		return out
	}
}
