package sync

import (
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"io"
	"time"
)

// adaptiveGzip writes one gzip stream whose compression level is chosen
// chunk by chunk from what the last chunks cost: how long compressing took
// and how long the consumer (the upload) kept us waiting. On a fast link
// (the emulator on loopback) the best choice is to store, on a slow one to
// compress; a fixed level would lose on one of them. Every chunk is
// compressed by a freshly reset flate writer and flushed to a byte boundary,
// so the blocks of different levels form one valid deflate stream (no back
// reference crosses a chunk); the gzip header and trailer are written here.
type adaptiveGzip struct {
	out   *timedWriter
	now   func() time.Time
	chunk []byte
	crc   uint32
	size  uint32 // input length mod 2^32, as gzip's ISIZE

	writers [len(gzipLadder)]*flate.Writer
	ctl     levelController
	started bool
	closed  bool
}

// gzipLadder lists the levels the controller picks from, cheapest first.
var gzipLadder = [...]int{flate.NoCompression, flate.HuffmanOnly, flate.BestSpeed, flate.DefaultCompression}

// Chunks under smallChunk are always compressed at gzipLadder[smallChunkLevel].
const (
	smallChunk      = 64 << 10
	smallChunkLevel = 2
)

// gzipChunk is the unit the level is chosen for: large enough for a
// compressor to find its matches, small enough to adapt within a file.
const gzipChunk = 1 << 20

func newAdaptiveGzip(w io.Writer, now func() time.Time) *adaptiveGzip {
	return &adaptiveGzip{
		out:   &timedWriter{w: w, now: now},
		now:   now,
		chunk: make([]byte, 0, gzipChunk),
		ctl:   newLevelController(),
	}
}

func (g *adaptiveGzip) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := gzipChunk - len(g.chunk)
		if room > len(p) {
			room = len(p)
		}
		g.chunk = append(g.chunk, p[:room]...)
		p = p[room:]
		if len(g.chunk) == gzipChunk {
			if err := g.compressChunk(false); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// Close compresses what is pending, ends the deflate stream and writes the
// trailer.
func (g *adaptiveGzip) Close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	if err := g.compressChunk(true); err != nil {
		return err
	}
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[0:4], g.crc)
	binary.LittleEndian.PutUint32(trailer[4:8], g.size)
	_, err := g.out.Write(trailer[:])
	return err
}

// Written is the number of compressed bytes written so far.
func (g *adaptiveGzip) Written() int64 { return g.out.n }

func (g *adaptiveGzip) compressChunk(final bool) error {
	if !g.started {
		g.started = true
		// ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=unix
		if _, err := g.out.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}); err != nil {
			return err
		}
	}
	g.crc = crc32.Update(g.crc, crc32.IEEETable, g.chunk)
	g.size += uint32(len(g.chunk))
	idx := g.ctl.pick()
	if len(g.chunk) < smallChunk {
		// A small remainder (an incremental archive, the end-of-archive
		// blocks) costs nothing to compress, whatever the link.
		idx = smallChunkLevel
	}
	fw := g.writers[idx]
	if fw == nil {
		var err error
		if fw, err = flate.NewWriter(g.out, gzipLadder[idx]); err != nil {
			return err
		}
		g.writers[idx] = fw
	} else {
		fw.Reset(g.out)
	}
	start, waitedBefore, outBefore := g.now(), g.out.waited, g.out.n
	if _, err := fw.Write(g.chunk); err != nil {
		return err
	}
	var err error
	if final {
		err = fw.Close()
	} else {
		err = fw.Flush()
	}
	if err != nil {
		return err
	}
	elapsed := g.now().Sub(start)
	waited := g.out.waited - waitedBefore
	g.ctl.observe(idx, len(g.chunk), int(g.out.n-outBefore), elapsed-waited, waited)
	g.chunk = g.chunk[:0]
	return nil
}

// timedWriter counts what it writes and how long its writes blocked.
type timedWriter struct {
	w      io.Writer
	now    func() time.Time
	n      int64
	waited time.Duration
}

func (t *timedWriter) Write(p []byte) (int, error) {
	start := t.now()
	n, err := t.w.Write(p)
	t.waited += t.now().Sub(start)
	t.n += int64(n)
	return n, err
}

// levelController picks the level that moves input fastest: at level L the
// input goes at the slower of the compressor (cost[L] ns per input byte) and
// the consumer (drain ns per output byte times ratio[L] output bytes per
// input byte). Costs and ratios start from rough priors and follow what each
// level measured; the consumer's pace is known from the chunks that had to
// wait for it. Now and then the next richer level is tried, so that a change
// in the data or the link is noticed.
type levelController struct {
	cost  [len(gzipLadder)]float64 // ns per input byte
	ratio [len(gzipLadder)]float64 // output bytes per input byte
	drain float64                  // consumer ns per output byte; 0 until measured
	best  int
	n     int
	force func(n int) int // tests: the level of the nth chunk
}

const (
	exploreEvery = 16
	ewmaWeight   = 0.3
)

// The priors are rough costs and savings of each level on source text, in
// the units of cost and ratio; each level's measurements replace them.
func newLevelController() levelController {
	return levelController{
		cost:  [len(gzipLadder)]float64{0.7, 3.3, 7.5, 40},
		ratio: [len(gzipLadder)]float64{1.0, 0.65, 0.35, 0.28},
	}
}

// storeOnly stores every chunk: the choice for a consumer on this machine
// (Config.Local).
func storeOnly(int) int { return 0 }

// pick returns the ladder index for the next chunk.
func (c *levelController) pick() int {
	c.n++
	if c.force != nil {
		return c.force(c.n)
	}
	if c.n%exploreEvery == 0 && c.best+1 < len(gzipLadder) && c.drain > 0 {
		return c.best + 1
	}
	return c.best
}

// observe records one chunk: its sizes, the time spent compressing and the
// time spent waiting for the consumer.
func (c *levelController) observe(idx, in, out int, compressing, waited time.Duration) {
	if in == 0 {
		return
	}
	ewma := func(old, v float64) float64 { return old*(1-ewmaWeight) + v*ewmaWeight }
	c.cost[idx] = ewma(c.cost[idx], float64(compressing.Nanoseconds())/float64(in))
	c.ratio[idx] = ewma(c.ratio[idx], float64(out)/float64(in))
	if out > 0 {
		// Waiting means the consumer set the pace for this chunk: it took
		// the whole chunk time to drain these bytes. Without waiting it was
		// at least that fast.
		pace := float64((compressing + waited).Nanoseconds()) / float64(out)
		switch {
		case waited > compressing/4:
			c.drain = ewma(c.drain, pace)
		case c.drain > pace:
			c.drain = ewma(c.drain, pace)
		}
	}
	best, bestCost := 0, c.perInputByte(0)
	for i := 1; i < len(gzipLadder); i++ {
		if v := c.perInputByte(i); v < bestCost*0.9 { // prefer cheaper levels on near ties
			best, bestCost = i, v
		}
	}
	c.best = best
}

func (c *levelController) perInputByte(i int) float64 {
	return max(c.cost[i], c.drain*c.ratio[i])
}
