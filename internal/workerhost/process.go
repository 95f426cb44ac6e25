// Package workerhost drives a plugin worker (daytona-worker or the Node
// reference worker) over stdio as Paperclip's host does, for the end-to-end
// tests and the tools that compare, replay or benchmark workers.
//
// A Process is the started worker: its stdin, its stdout (read either as raw
// lines with ReadLine, or as JSON-RPC messages by a Conn), its stderr, its
// exit and its memory. A Conn speaks JSON-RPC over any pair of streams:
// requests with ids, replies routed back by id, notifications handed to a
// callback in order, and the worker's own requests answered.
//
// Every goroutine has one owner: a Process's waiter ends when the worker
// exits, and the goroutine reading its stdout (ReadLine's or a Conn's) when
// that output ends, which Close forces.
package workerhost

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/paperclipai/daytona-worker/internal/procstat"
)

// Command says which worker to start and how.
type Command struct {
	Path string
	Args []string
	// Env is added to MinimalEnv; a variable set in both takes its value
	// from Env.
	Env []string
	Dir string
	// Stderr, if set, also gets the worker's stderr as it is written
	// (Process.Stderr keeps it all the same).
	Stderr io.Writer
}

// MinimalEnv is the environment a worker starts with, as the host's worker
// manager gives it: nothing of the caller's but PATH, and a fixed zone.
func MinimalEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "TZ=UTC"}
}

// ErrPartialLine reports output that ended inside a line.
var ErrPartialLine = errors.New("the worker's output ended inside a line")

// Process is one started worker.
type Process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	stderr syncBuffer

	writeMu sync.Mutex

	exited chan struct{} // closed once the worker has exited
	code   int
	err    error

	linesOnce sync.Once
	lines     *lineQueue
}

// Start starts the worker. Cancelling ctx kills it.
func Start(ctx context.Context, c Command) (*Process, error) {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = append(MinimalEnv(), c.Env...)
	cmd.Dir = c.Dir
	// Bounds the wait for stderr's copy when a child of the worker keeps
	// the pipe open.
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe: Wait must not close the
	// read end before the reader has drained it.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, stdin: stdin, stdout: outR, exited: make(chan struct{})}
	cmd.Stdout = outW
	cmd.Stderr = &p.stderr
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&p.stderr, c.Stderr)
	}
	err = cmd.Start()
	outW.Close()
	if err != nil {
		outR.Close()
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	defer close(p.exited)
	err := p.cmd.Wait()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		p.code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.code = -1
		}
	default:
		p.err = err
	}
}

// Pid is the worker's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Write writes b to the worker's stdin in one write.
func (p *Process) Write(b []byte) (int, error) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return p.stdin.Write(b)
}

// WriteLine writes line and a newline in one write.
func (p *Process) WriteLine(line []byte) error {
	buf := make([]byte, 0, len(line)+1)
	_, err := p.Write(append(append(buf, line...), '\n'))
	return err
}

// CloseStdin closes the worker's stdin (its end of input).
func (p *Process) CloseStdin() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return p.stdin.Close()
}

// Stdout is the worker's output, for a Conn. A caller reads it either so
// or with ReadLine, not both.
func (p *Process) Stdout() io.Reader { return p.stdout }

// ReadLine returns the next line the worker wrote, without its newline.
// At the end of the output it returns io.EOF, or the last bytes with
// ErrPartialLine when they end without a newline. The first call starts
// the goroutine that reads stdout; every line is kept until read.
func (p *Process) ReadLine(ctx context.Context) ([]byte, error) {
	p.linesOnce.Do(func() {
		p.lines = &lineQueue{changed: make(chan struct{})}
		go p.lines.fill(p.stdout)
	})
	return p.lines.next(ctx)
}

// Signal sends sig to the worker.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the worker to exit and returns its exit code, -1 when a
// signal ended it.
func (p *Process) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.exited:
		return p.code, p.err
	case <-ctx.Done():
		return 0, fmt.Errorf("waiting for the worker to exit: %w", ctx.Err())
	}
}

// Stderr is everything the worker wrote on stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Memory is the worker's peak and current resident memory in MiB.
func (p *Process) Memory() (peak, rss float64, err error) { return procstat.Memory(p.Pid()) }

// Close kills the worker if it still runs, waits for it, and closes its
// output, which ends whatever goroutine reads it.
func (p *Process) Close() error {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	_ = p.CloseStdin()
	return p.stdout.Close()
}

// lineQueue holds the lines read from the worker's output until read, so
// that the reading goroutine never waits for its consumer.
type lineQueue struct {
	mu      sync.Mutex
	lines   [][]byte
	err     error         // how the output ended, once it has
	changed chan struct{} // closed and replaced on every change
}

func (q *lineQueue) fill(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		q.mu.Lock()
		switch {
		case err == nil:
			q.lines = append(q.lines, line[:len(line)-1])
		case len(line) > 0:
			q.lines = append(q.lines, line)
			q.err = ErrPartialLine
		case errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed):
			q.err = io.EOF
		default:
			q.err = err
		}
		close(q.changed)
		q.changed = make(chan struct{})
		done := q.err != nil
		q.mu.Unlock()
		if done {
			return
		}
	}
}

func (q *lineQueue) next(ctx context.Context) ([]byte, error) {
	for {
		q.mu.Lock()
		if len(q.lines) > 0 {
			line := q.lines[0]
			q.lines = q.lines[1:]
			var err error
			if len(q.lines) == 0 && errors.Is(q.err, ErrPartialLine) {
				err = ErrPartialLine
				q.err = io.EOF
			}
			q.mu.Unlock()
			return line, err
		}
		err, changed := q.err, q.changed
		q.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a line from the worker: %w", ctx.Err())
		}
	}
}

// syncBuffer is a buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
