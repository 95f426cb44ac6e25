//go:build !linux

package worker

// block maps huge-page blocks on Linux (see largeblock_linux.go); elsewhere
// large outputs stay in the Go heap.
func (*largeBlocks) block(*blockBuffer) ([]byte, func()) { return nil, nil }
