// Command playback plays a transcript through a real daytona-worker and
// prints the conversation readably. It is what `make run` runs.
//
//	playback [--worker PATH] [--verbose] FILE
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/paperclipai/daytona-worker/internal/transcript"
)

func main() {
	workerPath := flag.String("worker", "bin/daytona-worker", "the daytona-worker binary to drive")
	verbose := flag.Bool("verbose", false, "print whole messages instead of shortening long values")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: playback [--worker PATH] [--verbose] TRANSCRIPT")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := play(flag.Arg(0), *workerPath, *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "playback:", err)
		os.Exit(1)
	}
}

func play(path, workerPath string, verbose bool, out io.Writer) error {
	steps, err := transcript.ParseFile(path)
	if err != nil {
		return err
	}
	cmd := exec.Command(workerPath)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the worker: %w", err)
	}
	fmt.Fprintf(out, "started %s (pid %d)\n\n", workerPath, cmd.Process.Pid)
	proc := &process{cmd: cmd}
	player := &transcript.Player{
		Stdin: stdin, Stdout: stdout, Process: proc, Vars: transcript.Vars{},
		Observe: func(fromHost bool, line []byte) {
			arrow := "worker ←"
			if fromHost {
				arrow = "host   →"
			}
			fmt.Fprintf(out, "%s %s\n", arrow, render(line, verbose))
		},
	}
	if _, err := player.Play(steps); err != nil {
		return err
	}
	code, _ := proc.Wait()
	fmt.Fprintf(out, "\nworker exited with code %d; every reply matched the transcript\n", code)
	return nil
}

// render shortens long string values so a message fits a terminal line.
func render(line []byte, verbose bool) string {
	if verbose {
		return string(line)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return string(line)
	}
	b, err := transcript.EncodeOrdered(shorten(v))
	if err != nil {
		return string(line)
	}
	return string(b)
}

func shorten(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = shorten(x)
		}
	case []any:
		if len(v) > 8 {
			return append(v[:8:8], fmt.Sprintf("… %d more", len(v)-8))
		}
		for i, x := range v {
			v[i] = shorten(x)
		}
	case string:
		if len(v) > 120 {
			return v[:120] + fmt.Sprintf("… (%d bytes)", len(v))
		}
		return strings.ToValidUTF8(v, "?")
	}
	return v
}

type process struct {
	cmd  *exec.Cmd
	once sync.Once
	code int
	err  error
}

func (p *process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *process) Wait() (int, error) {
	p.once.Do(func() {
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
	})
	return p.code, p.err
}
