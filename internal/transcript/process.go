package transcript

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// ExecProcess adapts a started *exec.Cmd to Process.
type ExecProcess struct {
	Cmd *exec.Cmd

	once sync.Once
	code int
	err  error
}

// Signal sends sig to the process.
func (p *ExecProcess) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Wait waits for the process once and returns its exit code (-1 when a
// signal ended it); later calls return the same.
func (p *ExecProcess) Wait() (int, error) {
	p.once.Do(func() {
		err := p.Cmd.Wait()
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
	})
	return p.code, p.err
}
