//go:build linux

package worker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"hash/maphash"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A large output's block is mapped outside the heap, aligned on a huge page,
// and unmapped once its buffer is unreachable; the budget counts it until
// then. (Not parallel: another test's mapping could take the freed address.)
func TestLargeBlocksAreMappedAlignedAndUnmapped(t *testing.T) {
	large := &largeBlocks{maxMapped: maxMappedOutput}
	addr := func() uintptr {
		b := &blockBuffer{large: large}
		_, _ = b.Write(make([]byte, largeOutput))
		_, _ = b.Write([]byte("x")) // past largeOutput: a large block
		last := b.blocks[len(b.blocks)-1]
		require.Equal(t, largeBlockSize, cap(last))
		require.Equal(t, "x", string(last))
		a := uintptr(unsafe.Pointer(unsafe.SliceData(last)))
		assert.Zero(t, a%hugePageSize, "the block starts on a huge page")
		require.True(t, mapped(t, a))
		assert.EqualValues(t, largeBlockSize+hugePageSize, large.mapped.Load())
		return a
	}()
	deadline := time.Now().Add(30 * time.Second)
	for mapped(t, addr) || large.mapped.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the block of an unreachable buffer is still mapped (%d bytes counted)", large.mapped.Load())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// Past its budget, a worker's outputs take heap blocks: the mapped memory
// the collector cannot see stays bounded.
func TestLargeBlocksStayWithinTheirBudget(t *testing.T) {
	t.Parallel()
	large := &largeBlocks{maxMapped: 2 * (largeBlockSize + hugePageSize)}
	b := &blockBuffer{large: large}
	chunk := make([]byte, 1<<20)
	for b.Len() < largeOutput+4*largeBlockSize {
		_, _ = b.Write(chunk)
	}
	var mappedBlocks, heapBlocks int
	for _, blk := range b.blocks {
		if cap(blk) == largeBlockSize {
			mappedBlocks++
		} else {
			heapBlocks++
		}
	}
	assert.Equal(t, 2, mappedBlocks, "as many mapped blocks as the budget holds")
	assert.Positive(t, heapBlocks, "then heap blocks")
	assert.LessOrEqual(t, large.mapped.Load(), large.maxMapped)
	assert.EqualValues(t, b.Len(), len(b.String()))
	runtime.KeepAlive(b)
}

// A relay's output past largeOutput is held in mapped blocks, and what the
// host gets (notifications and result) is exact while the collector runs
// concurrently. (Compared by digest: copies are slow under the race
// detector.)
func TestRelayOfMappedOutputIsExactUnderCollection(t *testing.T) {
	t.Parallel()
	large := &largeBlocks{maxMapped: maxMappedOutput}
	seed := maphash.MakeSeed()
	var streamed maphash.Hash
	streamed.SetSeed(seed)
	r := newLogNotifier(large, relayLimits{}, func(params any) error {
		var enc bytes.Buffer
		if err := params.(*logChunk).WriteJSON(&enc); err != nil {
			return err
		}
		var v struct{ Chunk string }
		if err := json.Unmarshal(enc.Bytes(), &v); err != nil {
			return err
		}
		_, _ = streamed.WriteString(v.Chunk)
		return nil
	})
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				time.Sleep(10 * time.Millisecond) // leave the relay some of the cores
			}
		}
	}()
	var want maphash.Hash
	want.SetSeed(seed)
	line := make([]byte, 0, 1100)
	filler := bytes.Repeat([]byte("output \"quoted\" \x01 é "), 50)
	for i, n := 0, 0; n < largeOutput+largeBlockSize+1<<20; i++ {
		line = append(append(strconv.AppendInt(line[:0], int64(i), 10), filler...), '\n')
		_, _ = want.Write(line)
		_, _ = r.stream(0).Write(line)
		n += len(line)
	}
	r.close()
	close(stop)
	<-collected
	assert.Positive(t, large.mapped.Load(), "the output went into mapped blocks")
	assert.Equal(t, want.Sum64(), streamed.Sum64(), "the notifications carry the output exactly")
	var result bytes.Buffer
	require.NoError(t, r.out[0].writeJSONString(&result))
	var got string
	require.NoError(t, json.Unmarshal(result.Bytes(), &got))
	assert.Equal(t, want.Sum64(), maphash.String(seed, got), "the result carries the output exactly")
}

// Encoding a result holds its buffer to the end: the collector runs while
// the first piece is written, and the mapped blocks after it must still be
// there to read (without the buffer kept alive they are unmapped by then and
// the read faults).
func TestWritingAResultKeepsItsBlocksMapped(t *testing.T) {
	t.Parallel()
	large := &largeBlocks{maxMapped: maxMappedOutput}
	w := &collectingWriter{large: large}
	func() {
		b := &blockBuffer{large: large}
		line := bytes.Repeat([]byte("0123456789abcdef"), 64)
		for b.Len() < largeOutput+2*largeBlockSize {
			_, _ = b.Write(line)
		}
		w.want = b.Len()
		require.NoError(t, b.writeJSONString(w))
	}()
	assert.EqualValues(t, w.want+2, w.n, "the whole output was encoded")
	assert.False(t, w.unmappedEarly, "blocks were unmapped while the result was being written")
}

// collectingWriter runs the collector on its first write and waits a while
// for cleanups of the buffer being written.
type collectingWriter struct {
	large         *largeBlocks
	want, n       int64
	waited        bool
	unmappedEarly bool
}

func (w *collectingWriter) Write(p []byte) (int, error) {
	if !w.waited {
		w.waited = true
		before := w.large.mapped.Load()
		for range 20 {
			runtime.GC()
			time.Sleep(5 * time.Millisecond)
			if w.large.mapped.Load() < before {
				w.unmappedEarly = true
				break
			}
		}
	}
	w.n += int64(len(p))
	return len(p), nil
}

// mapped reports whether addr lies in one of this process's mappings.
func mapped(t *testing.T, addr uintptr) bool {
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		span, _, _ := strings.Cut(sc.Text(), " ")
		lo, hi, _ := strings.Cut(span, "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h {
			return true
		}
	}
	return false
}
