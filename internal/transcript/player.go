package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// Process is the worker under test, as the player needs it.
type Process interface {
	Signal(sig os.Signal) error
	// Wait waits for the process to exit and returns its exit code.
	Wait() (int, error)
}

// Player replays a transcript against a running worker.
type Player struct {
	Stdin   io.WriteCloser
	Stdout  io.Reader
	Process Process
	// Vars are substituted into host and worker lines; captures add to it.
	Vars Vars
	// Update rewrites expectations from what the worker actually wrote.
	Update bool
	// Timeout bounds each wait for a worker line (default 20s).
	Timeout time.Duration
	// Quiet is how long the worker must stay silent before the player
	// concludes it has nothing more to say (default 150ms).
	Quiet time.Duration
	// Observe, if set, sees each line as it crosses (for printing).
	Observe func(fromHost bool, line []byte)
	// Hooks are the actions "hook NAME" steps run, with the variables.
	Hooks map[string]func(vars Vars) error

	lines    chan lineOrErr
	pushback []byte // a line read ahead and not yet consumed
}

type lineOrErr struct {
	line []byte
	err  error
}

// PlayError locates a failure in the transcript.
type PlayError struct {
	Line int
	Err  error
}

func (e *PlayError) Error() string { return fmt.Sprintf("transcript line %d: %v", e.Line, e.Err) }
func (e *PlayError) Unwrap() error { return e.Err }

var errTimeout = errors.New("timed out waiting for the worker")

func (p *Player) defaults() {
	if p.Timeout == 0 {
		p.Timeout = 20 * time.Second
	}
	if p.Quiet == 0 {
		p.Quiet = 150 * time.Millisecond
	}
	if p.Vars == nil {
		p.Vars = Vars{}
	}
}

// Play runs the steps. It returns the steps to write back in update mode
// (nil otherwise). The worker's stdout is read to its end by a goroutine that
// stops when the worker closes it; Play waits for the worker to exit.
func (p *Player) Play(steps []Step) ([]Step, error) {
	p.defaults()
	p.lines = make(chan lineOrErr, 64)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(p.lines)
		br := bufio.NewReaderSize(p.Stdout, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				p.lines <- lineOrErr{line: bytes.TrimRight(line, "\r\n")}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					p.lines <- lineOrErr{err: err}
				}
				return
			}
		}
	}()
	out, err := p.play(steps)
	// Whatever happened, end the worker and let the reader finish.
	_ = p.Stdin.Close()
	if err != nil {
		_ = p.Process.Signal(syscall.SIGKILL)
		go func() {
			for range p.lines {
			}
		}()
		_, _ = p.Process.Wait()
		<-readerDone
		return nil, err
	}
	return out, nil
}

func (p *Player) play(steps []Step) ([]Step, error) {
	var out []Step
	exited := false
	var lastRequestID json.RawMessage
	for i := 0; i < len(steps); i++ {
		s := steps[i]
		fail := func(err error) ([]Step, error) { return nil, &PlayError{Line: s.Line, Err: err} }
		switch {
		case s.Comment != nil:
			out = append(out, s)
		case s.Host != nil:
			line, err := Substitute(s.Host, p.Vars)
			if err != nil {
				return fail(err)
			}
			if err := p.send(line); err != nil {
				return fail(err)
			}
			out = append(out, s)
			lastRequestID = requestID(line)
			if p.Update {
				// Replace whatever expectations followed with what the
				// worker says now.
				j := i + 1
				var old []Step
				for j < len(steps) && (steps[j].isExpectation() || (steps[j].Comment != nil && j+1 < len(steps) && steps[j+1].isExpectation())) {
					if steps[j].isExpectation() {
						old = append(old, steps[j])
					}
					j++
				}
				fresh, err := p.observe(lastRequestID, old)
				if err != nil {
					return fail(err)
				}
				out = append(out, fresh...)
				i = j - 1
			}
		case s.HostRaw != nil:
			if err := p.send([]byte(*s.HostRaw)); err != nil {
				return fail(err)
			}
			out = append(out, s)
			lastRequestID = nil
			if p.Update {
				j := i + 1
				var old []Step
				for j < len(steps) && steps[j].isExpectation() {
					old = append(old, steps[j])
					j++
				}
				fresh, err := p.observe(nil, old)
				if err != nil {
					return fail(err)
				}
				out = append(out, fresh...)
				i = j - 1
			}
		case s.Worker != nil:
			line, err := p.next()
			if err != nil {
				return fail(err)
			}
			if err := p.match(s.Worker, line); err != nil {
				return fail(err)
			}
			out = append(out, s)
		case s.Unordered != nil:
			if err := p.matchUnordered(s.Unordered); err != nil {
				return fail(err)
			}
			out = append(out, s)
		case s.ExecuteLog != nil:
			if err := p.matchExecuteLog(s.ExecuteLog); err != nil {
				return fail(err)
			}
			out = append(out, s)
		case s.CloseStdin:
			if err := p.Stdin.Close(); err != nil {
				return fail(err)
			}
			out = append(out, s)
		case s.Signal != "":
			sig, err := parseSignal(s.Signal)
			if err != nil {
				return fail(err)
			}
			if err := p.Process.Signal(sig); err != nil {
				return fail(err)
			}
			out = append(out, s)
		case s.Exit != nil:
			if err := p.expectExit(*s.Exit); err != nil {
				return fail(err)
			}
			exited = true
			out = append(out, s)
		case s.SleepMs > 0:
			time.Sleep(time.Duration(s.SleepMs) * time.Millisecond)
			out = append(out, s)
		case s.Hook != "":
			hook, ok := p.Hooks[s.Hook]
			if !ok {
				return fail(fmt.Errorf("no hook named %q", s.Hook))
			}
			if err := hook(p.Vars); err != nil {
				return fail(fmt.Errorf("hook %s: %w", s.Hook, err))
			}
			out = append(out, s)
		}
	}
	if !exited {
		// Nothing more may come; then the worker must exit cleanly on EOF.
		if err := p.expectSilence(); err != nil {
			return nil, err
		}
		_ = p.Stdin.Close()
		if err := p.expectExit(0); err != nil {
			return nil, err
		}
	}
	if !p.Update {
		return nil, nil
	}
	return out, nil
}

func (p *Player) send(line []byte) error {
	if p.Observe != nil {
		p.Observe(true, line)
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	if _, err := p.Stdin.Write(buf); err != nil {
		return fmt.Errorf("write to worker: %w", err)
	}
	return nil
}

// next waits for the worker's next line.
func (p *Player) next() ([]byte, error) {
	return p.nextWithin(p.Timeout)
}

func (p *Player) nextWithin(d time.Duration) ([]byte, error) {
	if p.pushback != nil {
		line := p.pushback
		p.pushback = nil
		return line, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return nil, io.EOF
		}
		if l.err != nil {
			return nil, l.err
		}
		if p.Observe != nil {
			p.Observe(false, l.line)
		}
		return l.line, nil
	case <-t.C:
		return nil, errTimeout
	}
}

func (p *Player) match(expected, line []byte) error {
	captured, err := Match(expected, line, p.Vars)
	if err != nil {
		return fmt.Errorf("%w\n  worker wrote: %s", err, truncate(line))
	}
	for k, v := range captured {
		p.Vars[k] = v
	}
	return nil
}

func (p *Player) matchUnordered(expected []json.RawMessage) error {
	left := append([]json.RawMessage(nil), expected...)
	for len(left) > 0 {
		line, err := p.next()
		if err != nil {
			return fmt.Errorf("waiting for %d more unordered lines: %w", len(left), err)
		}
		found := -1
		var firstErr error
		for i, e := range left {
			captured, err := Match(e, line, p.Vars)
			if err == nil {
				for k, v := range captured {
					p.Vars[k] = v
				}
				found = i
				break
			}
			if firstErr == nil {
				firstErr = err
			}
		}
		if found < 0 {
			return fmt.Errorf("worker line matches none of the %d unordered expectations (first: %v)\n  worker wrote: %s", len(left), firstErr, truncate(line))
		}
		left = append(left[:found], left[found+1:]...)
	}
	return nil
}

// executeLogOf returns the invocation, stream and chunk of an execute.log
// notification line.
func executeLogOf(line []byte) (inv, stream, chunk string, ok bool) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Stream string `json:"stream"`
			Chunk  string `json:"chunk"`
		} `json:"params"`
		Invocation string          `json:"paperclipInvocationId"`
		ID         json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "execute.log" || m.ID != nil {
		return "", "", "", false
	}
	return m.Invocation, m.Params.Stream, m.Params.Chunk, true
}

// collectExecuteLog reads the run of execute.log notifications of inv that
// comes next, joined per stream; the first other line is pushed back.
func (p *Player) collectExecuteLog(inv string) (stdout, stderr string, err error) {
	var out, errOut strings.Builder
	for {
		line, err := p.next()
		if err != nil {
			return "", "", err
		}
		gotInv, stream, chunk, ok := executeLogOf(line)
		if !ok || gotInv != inv {
			p.pushback = line
			break
		}
		if stream == "stderr" {
			errOut.WriteString(chunk)
		} else {
			out.WriteString(chunk)
		}
	}
	return out.String(), errOut.String(), nil
}

func (p *Player) matchExecuteLog(want *ExecuteLogStep) error {
	inv, err := Substitute([]byte(StringVar(want.Invocation)), p.Vars)
	if err != nil {
		return err
	}
	var invocation string
	_ = json.Unmarshal(inv, &invocation)
	stdout, stderr, err := p.collectExecuteLog(invocation)
	if err != nil {
		return err
	}
	expected, _ := json.Marshal(map[string]string{"stdout": want.Stdout, "stderr": want.Stderr})
	actual, _ := json.Marshal(map[string]string{"stdout": stdout, "stderr": stderr})
	captured, err := Match(expected, actual, p.Vars)
	if err != nil {
		return fmt.Errorf("execute.log output of %s: %w", invocation, err)
	}
	for k, v := range captured {
		p.Vars[k] = v
	}
	return nil
}

// observe collects what the worker writes after a host line, for -update:
// up to the reply to requestID (if it was a request), then until quiet.
func (p *Player) observe(requestID json.RawMessage, old []Step) ([]Step, error) {
	var lines [][]byte
	waitingForReply := requestID != nil
	for {
		d := p.Quiet
		if waitingForReply {
			d = p.Timeout
		}
		line, err := p.nextWithin(d)
		if errors.Is(err, errTimeout) && !waitingForReply {
			break
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		lines = append(lines, line)
		if waitingForReply && bytes.Equal(responseID(line), requestID) {
			waitingForReply = false
		}
	}
	var oldMsgs [][]byte
	for _, s := range old {
		if s.Worker != nil {
			oldMsgs = append(oldMsgs, s.Worker)
		}
		oldMsgs = append(oldMsgs, rawList(s.Unordered)...)
	}
	steps := make([]Step, 0, len(lines))
	oldIdx := 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if inv, _, _, ok := executeLogOf(line); ok {
			// A run of execute.log lines becomes one execute_log step.
			var out, errOut strings.Builder
			for ; i < len(lines); i++ {
				gotInv, stream, chunk, ok := executeLogOf(lines[i])
				if !ok || gotInv != inv {
					break
				}
				if stream == "stderr" {
					errOut.WriteString(chunk)
				} else {
					out.WriteString(chunk)
				}
			}
			i--
			step := &ExecuteLogStep{Invocation: inv}
			joined, _ := json.Marshal(map[string]string{"stdout": out.String(), "stderr": errOut.String()})
			g, err := Generalize(joined, nil, p.Vars)
			if err == nil {
				var back struct{ Stdout, Stderr string }
				_ = json.Unmarshal(g, &back)
				step.Stdout, step.Stderr = back.Stdout, back.Stderr
			}
			steps = append(steps, Step{ExecuteLog: step})
			continue
		}
		var prev []byte
		for oldIdx < len(oldMsgs) {
			if _, _, _, isLog := executeLogOf(oldMsgs[oldIdx]); !isLog {
				break
			}
			oldIdx++
		}
		if oldIdx < len(oldMsgs) {
			prev = oldMsgs[oldIdx]
			oldIdx++
		}
		// Keep captures working for later host lines (and let this line's
		// own captures generalize its other values).
		if prev != nil {
			for k, v := range Capture(prev, line, p.Vars) {
				p.Vars[k] = v
			}
		}
		g, err := Generalize(line, prev, p.Vars)
		if err != nil {
			return nil, fmt.Errorf("worker wrote a line that is not JSON: %s", truncate(line))
		}
		steps = append(steps, Step{Worker: g})
	}
	return steps, nil
}

func rawList(msgs []json.RawMessage) [][]byte {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		out[i] = m
	}
	return out
}

func (p *Player) expectSilence() error {
	line, err := p.nextWithin(p.Quiet)
	switch {
	case errors.Is(err, errTimeout), errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("worker wrote a line the transcript does not expect: %s", truncate(line))
}

func (p *Player) expectExit(want int) error {
	// The worker's stdout ends when it exits; everything it wrote before
	// that must have been expected. Reading to the end first also keeps
	// Wait from closing the pipe under the reader.
	if p.pushback != nil {
		return fmt.Errorf("worker wrote a line the transcript does not expect: %s", truncate(p.pushback))
	}
	t := time.NewTimer(p.Timeout)
	defer t.Stop()
	for done := false; !done; {
		select {
		case l, ok := <-p.lines:
			if !ok {
				done = true
				break
			}
			if l.err != nil {
				return l.err
			}
			return fmt.Errorf("worker wrote a line the transcript does not expect: %s", truncate(l.line))
		case <-t.C:
			return fmt.Errorf("worker did not exit within %s", p.Timeout)
		}
	}
	code, err := p.Process.Wait()
	if err != nil {
		return fmt.Errorf("wait for worker: %w", err)
	}
	if code != want {
		return fmt.Errorf("worker exited with %d, want %d", code, want)
	}
	return nil
}

func parseSignal(name string) (os.Signal, error) {
	switch strings.ToUpper(strings.TrimPrefix(strings.ToUpper(name), "SIG")) {
	case "TERM":
		return syscall.SIGTERM, nil
	case "INT":
		return syscall.SIGINT, nil
	case "KILL":
		return syscall.SIGKILL, nil
	case "HUP":
		return syscall.SIGHUP, nil
	}
	return nil, fmt.Errorf("unknown signal %q", name)
}

func requestID(line []byte) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method == nil || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil
	}
	return compact(m.ID)
}

func responseID(line []byte) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != nil || len(m.ID) == 0 {
		return nil
	}
	return compact(m.ID)
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func truncate(b []byte) string {
	const max = 400
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
