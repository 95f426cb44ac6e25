//go:build linux

package worker

import (
	"runtime"
	"syscall"
	"unsafe"
)

// hugePageSize is the size of a transparent huge page on x86-64 and on
// arm64 with 4 KiB pages.
const hugePageSize = 2 << 20

// block maps an empty block of largeBlockSize bytes for owner outside the
// Go heap, aligned on a huge page and advised to be backed by huge pages
// when first touched, and unmaps it once owner is unreachable. It returns
// nil (owner then takes heap memory) when l is nil, when l's budget is
// spent, or when the mapping fails.
//
// In the Go heap such a block would be backed by 4 KiB pages (the runtime
// asks for no huge pages there), and memory reused from an earlier command
// would be cleared through all of them first. A fresh anonymous mapping is
// zero already, and on a system with transparent huge pages (enabled, or
// on madvise) each 2 MiB of output costs one page fault instead of 512.
// The advice changes nothing else: without huge pages the block is backed
// as any memory is.
//
// The block's bytes may be read only while owner is reachable: slices of
// the block do not keep owner alive (the collector does not follow pointers
// outside its heap), so every reader holds owner (see blockBuffer).
//
// free unmaps the block at once, before owner is unreachable (a stream the
// result is sure to cut drops a relayed middle, see trimMiddle); the caller
// must not touch the block after it.
func (l *largeBlocks) block(owner *blockBuffer) (blk []byte, free func()) {
	if l == nil {
		return nil, nil
	}
	const size = largeBlockSize + hugePageSize
	if l.mapped.Add(size) > l.maxMapped {
		l.mapped.Add(-size)
		return nil, nil
	}
	raw, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		l.mapped.Add(-size)
		return nil, nil
	}
	// The head and tail around the aligned block are never touched, so they
	// cost address space only.
	skip := (hugePageSize - uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%hugePageSize) % hugePageSize
	blk = raw[skip : skip+largeBlockSize : skip+largeBlockSize]
	_ = syscall.Madvise(blk, syscall.MADV_HUGEPAGE)
	m := mappedBlock{raw: raw, from: l}
	cleanup := runtime.AddCleanup(owner, unmapBlock, m)
	return blk[:0], func() {
		cleanup.Stop()
		unmapBlock(m)
	}
}

// mappedBlock is a mapping to undo once its owner is unreachable.
type mappedBlock struct {
	raw  []byte
	from *largeBlocks
}

func unmapBlock(m mappedBlock) {
	if syscall.Munmap(m.raw) == nil {
		m.from.mapped.Add(-int64(len(m.raw)))
	}
}
