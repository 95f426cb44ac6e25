package sync

import (
	"io"
	stdsync "sync"
)

// bufferedPipe is io.Pipe with a bounded buffer between its ends: the
// writer goes on while the reader is busy elsewhere (a download keeps
// arriving while the extractor creates files), up to chunks × chunkSize
// bytes ahead, and then waits. Close and CloseWithError on either end work
// as io.Pipe's.
type bufferedPipe struct {
	filled chan []byte
	free   chan []byte

	mu      stdsync.Mutex
	werr    error         // set when the writer closed (io.EOF for Close)
	rerr    error         // set when the reader closed
	rclosed chan struct{} // closed when the reader closed
	wclosed chan struct{} // closed when the writer closed
	cur     []byte        // the reader's unread part of its current chunk
	held    []byte        // the chunk cur belongs to
}

func newBufferedPipe(chunks, chunkSize int) (*bufferedPipeReader, *bufferedPipeWriter) {
	p := &bufferedPipe{
		filled:  make(chan []byte, chunks),
		free:    make(chan []byte, chunks),
		rclosed: make(chan struct{}),
		wclosed: make(chan struct{}),
	}
	for i := 0; i < chunks; i++ {
		p.free <- make([]byte, chunkSize)
	}
	return &bufferedPipeReader{p}, &bufferedPipeWriter{p}
}

type bufferedPipeReader struct{ p *bufferedPipe }
type bufferedPipeWriter struct{ p *bufferedPipe }

func (w *bufferedPipeWriter) Write(b []byte) (int, error) {
	p := w.p
	n := 0
	for len(b) > 0 {
		var buf []byte
		select {
		case buf = <-p.free:
		case <-p.rclosed:
			return n, p.readerErr()
		}
		k := copy(buf[:cap(buf)], b)
		select {
		case p.filled <- buf[:k]:
		case <-p.rclosed:
			return n, p.readerErr()
		}
		n += k
		b = b[k:]
	}
	return n, nil
}

// Close ends the stream: the reader gets io.EOF after the buffered bytes.
func (w *bufferedPipeWriter) Close() error { return w.CloseWithError(nil) }

// CloseWithError ends the stream with err for the reader (after the
// buffered bytes).
func (w *bufferedPipeWriter) CloseWithError(err error) error {
	if err == nil {
		err = io.EOF
	}
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr == nil {
		p.werr = err
		close(p.wclosed)
	}
	return nil
}

func (p *bufferedPipe) readerErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rerr
}

func (r *bufferedPipeReader) Read(b []byte) (int, error) {
	p := r.p
	if len(p.cur) == 0 {
		if p.held != nil {
			p.free <- p.held[:cap(p.held)]
			p.held = nil
		}
		select {
		case buf := <-p.filled:
			p.cur, p.held = buf, buf
		default:
			select {
			case buf := <-p.filled:
				p.cur, p.held = buf, buf
			case <-p.wclosed:
				// Whatever was written before the close is read first.
				select {
				case buf := <-p.filled:
					p.cur, p.held = buf, buf
				default:
					p.mu.Lock()
					err := p.werr
					p.mu.Unlock()
					return 0, err
				}
			case <-p.rclosed:
				return 0, io.ErrClosedPipe
			}
		}
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

// CloseWithError makes later and pending writes fail with err.
func (r *bufferedPipeReader) CloseWithError(err error) error {
	if err == nil {
		err = io.ErrClosedPipe
	}
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = err
		close(p.rclosed)
	}
	return nil
}
