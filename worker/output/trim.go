package output

import (
	"encoding/binary"
	"math/bits"
)

// A command that prints more than the host reads in one message gets a
// result that carries only the start and the end of its output (see
// fitOutputs). Holding the rest until the command ends would let a command
// that prints without end (a runaway loop, a `cat` of a disk image) take
// all of the worker's memory, and every lease with it. So once a stream is
// sure to be cut, its middle is dropped as soon as the host has had it in
// execute.log: what stays is enough output from the start and from the end
// for any cut the result can make, about the host's limit in all.
//
// "Sure to be cut" needs no exact count: each byte that is not a UTF-8
// continuation byte starts a character (or a maximal subpart of ill-formed
// UTF-8), and each of those takes at least one UTF-16 unit of JSON, so the
// count of such bytes is a lower bound of what the stream takes. Past the
// whole limit in that bound, no budget lets the stream fit.

// middleTrim is a Buffer's state for dropping its middle. The dropped
// blocks are a run [from, to) of b.blocks, each left nil, holding bytes
// bytes in all; the kept start is the blocks before from, the kept end
// those from to on.
type middleTrim struct {
	lows     []int64 // lower bound of the units of each block measured (blocks filled)
	lowSum   int64
	headEnd  int // blocks of the kept start, once decided (0: not yet)
	from, to int
	bytes    int64
}

// holed reports whether part of the output was dropped.
func (b *Buffer) holed() bool { return b.trim.to > b.trim.from }

// holeSpan returns the offsets of the first byte dropped and of the first
// byte kept after the hole.
func (b *Buffer) holeSpan() (start, end int64) {
	for _, blk := range b.blocks[:b.trim.from] {
		start += int64(len(blk))
	}
	return start, start + b.trim.bytes
}

// lowUnits is a lower bound of the UTF-16 units p takes in JSON: its bytes
// other than UTF-8 continuation bytes (10xxxxxx).
func lowUnits(p []byte) int64 {
	const highs = 0x8080808080808080
	n := int64(len(p))
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x := binary.LittleEndian.Uint64(p[i:])
		if x&highs == 0 {
			continue
		}
		// Bit 7 set and bit 6 clear, in each byte.
		n -= int64(bits.OnesCount64(x & highs &^ (x << 1)))
	}
	for ; i < len(p); i++ {
		if p[i]&0xC0 == 0x80 {
			n--
		}
	}
	return n
}

// trimMiddle drops the blocks of the middle of the output that a result
// limited to limit UTF-16 units cannot carry and that are before sent (the
// relay has handed the host everything before it), once the output is sure
// not to fit. A cursor left at the end of a block it drops moves to the
// start of the next: the dropped block is nil, and its end offset would
// point past it. Call it with whatever serialises Write.
func (b *Buffer) trimMiddle(sent *blockCursor, limit int64) {
	if limit <= 0 || b.n <= limit {
		return // not even the bytes reach the limit
	}
	t := &b.trim
	// Measure the blocks filled since the last call.
	for len(t.lows) < len(b.blocks) {
		blk := b.blocks[len(t.lows)]
		if len(blk) < cap(blk) {
			break // still being written to
		}
		low := lowUnits(blk)
		t.lows = append(t.lows, low)
		t.lowSum += low
	}
	if t.lowSum <= limit {
		return
	}
	// The result takes at most half its room from each end: keep a block
	// more than half the limit needs at each, for the characters cut across
	// the edges of a block.
	half := limit/2 + 1
	if t.headEnd == 0 {
		var sum int64
		for i, low := range t.lows {
			sum += low
			if sum >= half {
				t.headEnd = min(i+2, len(t.lows))
				break
			}
		}
		if t.headEnd == 0 {
			return
		}
		t.from, t.to = t.headEnd, t.headEnd
		// The result will not read the map (a cut escapes what it keeps),
		// and it would go on growing with the output.
		b.escapes.drop()
	}
	// The kept end starts where the measured blocks after it (and the one
	// still being written) reach half the limit, plus one block.
	tailStart := len(t.lows)
	for sum := int64(0); tailStart > t.to && sum < half; {
		tailStart--
		sum += t.lows[tailStart]
	}
	tailStart--
	// Only what the host has had may go: the blocks wholly before sent.
	sentBlocks := sent.blk
	if sent.blk < len(b.blocks) && sent.off == len(b.blocks[sent.blk]) {
		sentBlocks++
	}
	for t.to < min(tailStart, sentBlocks) {
		blk := b.blocks[t.to]
		t.bytes += int64(len(blk))
		b.blocks[t.to] = nil
		t.to++
	}
	if sent.blk >= t.from && sent.blk < t.to {
		*sent = blockCursor{blk: t.to}
	}
}
