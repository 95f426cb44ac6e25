package transcript

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
)

// pipeWorker is a Worker over streams and a Process the caller started.
// Its reader goroutine ends when the output does; stop waits for that.
type pipeWorker struct {
	stdin   io.WriteCloser
	process Process
	lines   chan lineOrErr
	done    chan struct{}
}

type lineOrErr struct {
	line []byte
	err  error
}

func newPipeWorker(stdin io.WriteCloser, stdout io.Reader, process Process) *pipeWorker {
	w := &pipeWorker{stdin: stdin, process: process, lines: make(chan lineOrErr, 64), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(w.lines)
		br := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				w.lines <- lineOrErr{line: bytes.TrimRight(line, "\r\n")}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					w.lines <- lineOrErr{err: err}
				}
				return
			}
		}
	}()
	return w
}

func (w *pipeWorker) WriteLine(line []byte) error {
	buf := make([]byte, 0, len(line)+1)
	_, err := w.stdin.Write(append(append(buf, line...), '\n'))
	return err
}

func (w *pipeWorker) ReadLine(ctx context.Context) ([]byte, error) {
	select {
	case l, ok := <-w.lines:
		if !ok {
			return nil, io.EOF
		}
		return l.line, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (w *pipeWorker) CloseStdin() error          { return w.stdin.Close() }
func (w *pipeWorker) Signal(sig os.Signal) error { return w.process.Signal(sig) }

func (w *pipeWorker) Wait(context.Context) (int, error) { return w.process.Wait() }

// stop closes stdin and drains the output until the reader ends, which it
// does when the worker exits.
func (w *pipeWorker) stop() {
	_ = w.stdin.Close()
	go func() {
		for range w.lines {
		}
	}()
	<-w.done
}
