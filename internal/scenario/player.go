package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Worker is the worker under test as the player drives it;
// *workerhost.Process is one.
type Worker interface {
	WriteLine(line []byte) error
	// ReadLine returns the next line the worker wrote, io.EOF at the end.
	ReadLine(ctx context.Context) ([]byte, error)
	CloseStdin() error
	Signal(sig os.Signal) error
	// Wait returns the exit code, -1 when a signal ended the worker.
	Wait(ctx context.Context) (int, error)
}

// Player plays a scenario against a running worker. It checks the
// scenario's expectations (and, with Update, rewrites them), or, when
// Collect is set, hands each step's output to Collect instead.
type Player struct {
	Worker Worker

	// Vars are substituted into steps; captures add to it.
	Vars Vars
	// Update rewrites expectations from what the worker actually wrote.
	Update bool
	// Timeout bounds each wait for a worker line, or a step's wait for its
	// output in collect mode (default 20s; a step's timeout_ms wins).
	Timeout time.Duration
	// Quiet is how long the worker must stay silent before the player
	// concludes it has nothing more to say (default 150ms).
	Quiet time.Duration
	// Observe, if set, sees each line as it crosses (for printing).
	Observe func(fromHost bool, line []byte)
	// Hooks are the actions "hook NAME" steps run, by their whole text.
	Hooks map[string]func(vars Vars) error
	// RunHook runs a hook Hooks does not name, given its text after
	// substitution.
	RunHook func(text string, vars Vars) error

	// Collect, when set, plays in collect mode: the scenario holds no
	// expectations, and each step with output hands Collect what the
	// worker wrote during it and the index of the reply among those lines
	// (-1 when none came). i indexes the steps given to Play.
	Collect func(i int, lines [][]byte, reply int) error
	// Inspect makes the line of a sandboxes or files step (collect mode).
	Inspect func(s *Step) ([]byte, error)

	pushback []byte // a line read ahead and not yet consumed
}

// PlayError locates a failure in the scenario.
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
// (nil otherwise). In check mode a worker that has not exited by the last
// step must then stay silent and exit 0 at the end of its input; on a
// failure the worker is killed.
func (p *Player) Play(steps []Step) ([]Step, error) {
	p.defaults()
	out, err := p.play(steps)
	if err != nil && p.Collect == nil {
		_ = p.Worker.CloseStdin()
		_ = p.Worker.Signal(syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
		defer cancel()
		_, _ = p.Worker.Wait(ctx)
		return nil, err
	}
	return out, err
}

func (p *Player) play(steps []Step) ([]Step, error) {
	var out []Step
	exited := false
	for i := 0; i < len(steps); i++ {
		s := steps[i]
		fail := func(err error) ([]Step, error) { return nil, &PlayError{Line: s.Line, Err: err} }
		if p.Collect != nil {
			if s.isExpectation() || s.Exit != nil {
				return fail(errors.New("collect mode takes no expectations"))
			}
			if s.CollectsOutput() {
				lines, reply, err := p.collect(&s)
				if err == nil {
					err = p.Collect(i, lines, reply)
				}
				if err != nil {
					return fail(err)
				}
				continue
			}
		}
		var err error
		switch {
		case s.Comment != nil, s.Scenario != nil:
		case s.Host != nil, s.HostRaw != nil:
			text := []byte(s.Host)
			if s.HostRaw != nil {
				text = []byte(*s.HostRaw)
			}
			var line []byte
			if line, err = Substitute(text, p.Vars); err == nil {
				err = p.send(line)
			}
			if err == nil && p.Update {
				var requestID json.RawMessage // a raw line waits for no reply, whatever it holds
				if s.HostRaw == nil {
					requestID = RequestID(line)
				}
				out = append(out, s)
				i, err = p.update(steps, i, &out, requestID)
				if err != nil {
					return fail(err)
				}
				continue
			}
		case s.Worker != nil:
			var line []byte
			if line, err = p.next(p.Timeout); err == nil {
				err = p.match(s.Worker, line)
			}
		case s.Unordered != nil:
			err = p.matchUnordered(s.Unordered)
		case s.ExecuteLog != nil:
			err = p.matchExecuteLog(s.ExecuteLog)
		case s.CloseStdin:
			err = p.Worker.CloseStdin()
		case s.Signal != "":
			var sig os.Signal
			if sig, err = parseSignal(s.Signal); err == nil {
				err = p.Worker.Signal(sig)
			}
		case s.Exit != nil:
			err = p.expectExit(*s.Exit)
			exited = true
		case s.SleepMs > 0:
			time.Sleep(time.Duration(s.SleepMs) * time.Millisecond)
		case s.Hook != "":
			err = p.hook(s.Hook)
		default:
			err = errors.New("a step the player cannot play here")
		}
		if err != nil {
			return fail(err)
		}
		out = append(out, s)
	}
	if p.Collect != nil {
		return nil, nil
	}
	if !exited {
		// Nothing more may come; then the worker must exit cleanly on EOF.
		if err := p.expectSilence(); err != nil {
			return nil, err
		}
		_ = p.Worker.CloseStdin()
		if err := p.expectExit(0); err != nil {
			return nil, err
		}
	}
	if !p.Update {
		return nil, nil
	}
	return out, nil
}

// update replaces the expectations that follow the host step at i (and the
// comments among them) with what the worker writes now, and returns the
// index of the last step it consumed.
func (p *Player) update(steps []Step, i int, out *[]Step, requestID json.RawMessage) (int, error) {
	j := i + 1
	var old []Step
	for j < len(steps) && (steps[j].isExpectation() || (steps[j].Comment != nil && j+1 < len(steps) && steps[j+1].isExpectation())) {
		if steps[j].isExpectation() {
			old = append(old, steps[j])
		}
		j++
	}
	fresh, err := p.observe(requestID, old)
	if err != nil {
		return i, err
	}
	*out = append(*out, fresh...)
	return j - 1, nil
}

func (p *Player) hook(text string) error {
	if hook, ok := p.Hooks[text]; ok {
		if err := hook(p.Vars); err != nil {
			return fmt.Errorf("hook %s: %w", text, err)
		}
		return nil
	}
	if p.RunHook == nil {
		return fmt.Errorf("no hook named %q", text)
	}
	sub, err := Substitute([]byte(text), p.Vars)
	if err != nil {
		return err
	}
	if err := p.RunHook(string(sub), p.Vars); err != nil {
		return fmt.Errorf("hook %s: %w", text, err)
	}
	return nil
}

// collect plays a step with output in collect mode: a host request's
// lines up to its reply, a notification's or a raw line's until quiet,
// what the worker writes after close_stdin until it exits.
func (p *Player) collect(s *Step) ([][]byte, int, error) {
	timeout := p.Timeout
	if s.TimeoutMs > 0 {
		timeout = time.Duration(s.TimeoutMs) * time.Millisecond
	}
	switch {
	case s.Sandboxes, s.Files != "":
		if p.Inspect == nil {
			return nil, -1, errors.New("nothing to inspect with")
		}
		line, err := p.Inspect(s)
		return [][]byte{line}, -1, err
	case s.CloseStdin:
		_ = p.Worker.CloseStdin()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		lines, _ := p.readUntil(ctx, func([]byte) bool { return false })
		if ctx.Err() != nil {
			_ = p.Worker.Signal(syscall.SIGKILL)
		}
		code, err := p.Worker.Wait(context.Background())
		if err != nil {
			return nil, -1, err
		}
		return append(lines, fmt.Appendf(nil, `{"exit":%d}`, code)), -1, nil
	case s.HostRaw != nil:
		line, err := Substitute([]byte(*s.HostRaw), p.Vars)
		if err == nil {
			err = p.send(line)
		}
		if err != nil {
			return nil, -1, err
		}
		var lines [][]byte
		if s.Replies > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			n := 0
			lines, _ = p.readUntil(ctx, func([]byte) bool { n++; return n >= s.Replies })
			cancel()
		}
		lines = append(lines, p.readQuiet()...)
		orderReplies(lines)
		return lines, len(lines) - 1, nil
	}
	sub, err := Substitute(s.Host, p.Vars)
	if err != nil {
		return nil, -1, err
	}
	var line bytes.Buffer
	if err := json.Compact(&line, sub); err != nil {
		return nil, -1, fmt.Errorf("host line after substitution: %w", err)
	}
	if err := p.send(line.Bytes()); err != nil {
		return nil, -1, err
	}
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	_ = json.Unmarshal(line.Bytes(), &head)
	if head.Method == nil || len(head.ID) == 0 {
		return p.readQuiet(), -1, nil
	}
	want := canonical(head.ID)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lines, reply := p.readUntil(ctx, func(b []byte) bool {
		var m struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		return bytes.Equal(responseID(b), want) && json.Unmarshal(b, &m) == nil && (m.Result != nil || m.Error != nil)
	})
	return lines, reply, nil
}

// readUntil reads lines until done holds for one (its index is returned)
// or the output ends or ctx does (-1).
func (p *Player) readUntil(ctx context.Context, done func([]byte) bool) ([][]byte, int) {
	var lines [][]byte
	for {
		line, err := p.read(ctx)
		if err != nil {
			return lines, -1
		}
		lines = append(lines, line)
		if done(line) {
			return lines, len(lines) - 1
		}
	}
}

// readQuiet reads lines until none comes for Quiet.
func (p *Player) readQuiet() [][]byte {
	var lines [][]byte
	for {
		line, err := p.next(p.Quiet)
		if err != nil {
			return lines
		}
		lines = append(lines, line)
	}
}

// orderReplies sorts, in place, the replies among lines by their id,
// leaving every other line where it is. Requests written together in one
// raw line are served concurrently, so the order of their replies is a
// race, not a property of the worker.
func orderReplies(lines [][]byte) {
	var at []int
	var replies [][]byte
	for i, b := range lines {
		if id := responseID(b); id != nil && string(id) != "null" {
			at = append(at, i)
			replies = append(replies, b)
		}
	}
	sort.SliceStable(replies, func(a, b int) bool { return string(responseID(replies[a])) < string(responseID(replies[b])) })
	for k, pos := range at {
		lines[pos] = replies[k]
	}
}

func (p *Player) send(line []byte) error {
	if p.Observe != nil {
		p.Observe(true, line)
	}
	if err := p.Worker.WriteLine(line); err != nil {
		return fmt.Errorf("write to worker: %w", err)
	}
	return nil
}

// next waits up to d for the worker's next line.
func (p *Player) next(d time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return p.read(ctx)
}

func (p *Player) read(ctx context.Context) ([]byte, error) {
	if p.pushback != nil {
		line := p.pushback
		p.pushback = nil
		return line, nil
	}
	line, err := p.Worker.ReadLine(ctx)
	if err != nil && len(line) == 0 { // output that ends inside a line still gives that line
		if ctx.Err() != nil {
			return nil, errTimeout
		}
		return nil, err
	}
	if p.Observe != nil {
		p.Observe(false, line)
	}
	return line, nil
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
		line, err := p.next(p.Timeout)
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
		line, err := p.next(p.Timeout)
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
		line, err := p.next(d)
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
		for _, m := range s.Unordered {
			oldMsgs = append(oldMsgs, m)
		}
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

func (p *Player) expectSilence() error {
	line, err := p.next(p.Quiet)
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
	// that must have been expected.
	ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
	defer cancel()
	line, err := p.read(ctx)
	switch {
	case errors.Is(err, errTimeout):
		return fmt.Errorf("worker did not exit within %s", p.Timeout)
	case err == nil:
		return fmt.Errorf("worker wrote a line the transcript does not expect: %s", truncate(line))
	case !errors.Is(err, io.EOF):
		return err
	}
	code, err := p.Worker.Wait(ctx)
	if err != nil {
		return fmt.Errorf("wait for worker: %w", err)
	}
	if code != want {
		return fmt.Errorf("worker exited with %d, want %d", code, want)
	}
	return nil
}

func parseSignal(name string) (os.Signal, error) {
	switch strings.TrimPrefix(strings.ToUpper(name), "SIG") {
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

// RequestID is the canonical id of a request line (one with a method and
// an id that is not null), nil for anything else.
func RequestID(line []byte) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method == nil || len(m.ID) == 0 || string(m.ID) == "null" {
		return nil
	}
	return canonical(m.ID)
}

// responseID is the canonical id of a response line, nil for anything else.
func responseID(line []byte) json.RawMessage {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != nil || len(m.ID) == 0 {
		return nil
	}
	return canonical(m.ID)
}

// canonical re-encodes a JSON value, so that ids written differently
// (1.0 and 1, escapes) compare as the values they are.
func canonical(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

func truncate(b []byte) string {
	const max = 400
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
