package refcheck

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/transcript"
	"github.com/paperclipai/daytona-worker/pty"
)

// Command starts one worker: Argv[0] with the rest as arguments.
type Command struct {
	Argv []string
}

// Options tune a run.
type Options struct {
	// ReplyTimeout bounds the wait for one reply (a step's timeout_ms wins).
	ReplyTimeout time.Duration
	// Quiet is how long a step that expects no reply waits for lines.
	Quiet time.Duration
	// Stderr, when set, receives each worker's stderr after its scenario.
	Stderr func(scenario, side string, stderr []byte)
}

func (o Options) withDefaults() Options {
	if o.ReplyTimeout == 0 {
		o.ReplyTimeout = 90 * time.Second
	}
	if o.Quiet == 0 {
		o.Quiet = 700 * time.Millisecond
	}
	return o
}

// StepOutput is what one worker wrote during one step, normalised.
type StepOutput struct {
	Lines []any
}

// Play runs a scenario through one worker against a fresh emulator and
// returns the normalised output of every step (nil for steps without
// output). A failure of the harness itself (an emulator that does not
// start, a worker that cannot be spawned) is an error.
func Play(ctx context.Context, sc *Scenario, cmd Command, opts Options, side string) ([]*StepOutput, error) {
	opts = opts.withDefaults()
	env, err := startEmulator(sc.Setup.Emulator)
	if err != nil {
		return nil, err
	}
	defer env.close()

	vars := env.vars()
	hostDir, err := newHostDir()
	if err != nil {
		return nil, err
	}
	defer removeHostDir(hostDir)
	vars["HOST_DIR"] = hostDir
	p := &player{sc: sc, opts: opts, env: env, vars: vars, jsonVars: map[string]json.RawMessage{}}
	cfg, _ := json.Marshal(map[string]string{"apiKey": vars["DAYTONA_API_KEY"], "apiUrl": vars["DAYTONA_API_URL"]})
	p.jsonVars["CFG"] = cfg
	p.repl = newReplacer(vars)

	proc, err := p.spawn(ctx, cmd)
	if err != nil {
		return nil, err
	}
	p.proc = proc
	defer func() {
		stderr := proc.stop()
		if opts.Stderr != nil {
			opts.Stderr(sc.Name, side, stderr)
		}
	}()

	if !sc.Setup.NoInitialize {
		init := `{"jsonrpc":"2.0","id":"refcheck-init","method":"initialize","params":{"manifest":{},"config":{},"instanceInfo":{"instanceId":"refcheck","hostVersion":"1"},"apiVersion":1}}`
		if _, _, err := p.request([]byte(init), opts.ReplyTimeout); err != nil {
			return nil, fmt.Errorf("initialize: %w", err)
		}
	}
	outputs := make([]*StepOutput, len(sc.Steps))
	for i := range sc.Steps {
		st := &sc.Steps[i]
		out, err := p.step(ctx, st)
		if err != nil {
			return outputs, fmt.Errorf("%s:%d: %w", sc.Path, st.Line, err)
		}
		outputs[i] = out
	}
	return outputs, nil
}

type player struct {
	sc       *Scenario
	opts     Options
	env      *emulatorEnv
	vars     map[string]string
	jsonVars map[string]json.RawMessage
	repl     *replacer
	proc     *process
}

var varPattern = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

// substitute replaces the variables in one scenario line.
func (p *player) substitute(text string) (string, error) {
	for name, raw := range p.jsonVars {
		text = strings.ReplaceAll(text, `"${`+name+`}"`, string(raw))
	}
	var unknown []string
	text = varPattern.ReplaceAllStringFunc(text, func(m string) string {
		name := varPattern.FindStringSubmatch(m)[1]
		if v, ok := p.vars[name]; ok {
			b, _ := json.Marshal(v)
			return string(b[1 : len(b)-1])
		}
		if raw, ok := p.jsonVars[name]; ok {
			b, _ := json.Marshal(string(raw))
			return string(b[1 : len(b)-1])
		}
		unknown = append(unknown, name)
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown variables %v", unknown)
	}
	return text, nil
}

func (p *player) step(ctx context.Context, st *Step) (*StepOutput, error) {
	timeout := p.opts.ReplyTimeout
	if st.TimeoutMs > 0 {
		timeout = time.Duration(st.TimeoutMs) * time.Millisecond
	}
	switch {
	case st.SleepMs > 0:
		time.Sleep(time.Duration(st.SleepMs) * time.Millisecond)
		return nil, nil
	case st.Hook != "":
		h, err := ParseHook(st.Hook)
		if err != nil {
			return nil, err
		}
		return nil, p.hook(h)
	case st.Sandboxes:
		line, err := p.env.sandboxesLine()
		if err != nil {
			return nil, err
		}
		return p.finish(st, [][]byte{line}, -1)
	case st.Files != "":
		// substitute works on JSON text: the path goes through as a JSON
		// string.
		quoted, _ := json.Marshal(st.Files)
		text, err := p.substitute(string(quoted))
		if err != nil {
			return nil, err
		}
		var dir string
		if err := json.Unmarshal([]byte(text), &dir); err != nil {
			return nil, fmt.Errorf("files path after substitution: %w", err)
		}
		return p.finish(st, [][]byte{filesLine(dir)}, -1)
	case st.CloseStdin:
		lines, code := p.proc.closeAndWait(timeout)
		lines = append(lines, []byte(fmt.Sprintf(`{"exit":%d}`, code)))
		return p.finish(st, lines, -1)
	case st.HostRaw != nil:
		text, err := p.substitute(*st.HostRaw)
		if err != nil {
			return nil, err
		}
		if err := p.proc.write([]byte(text + "\n")); err != nil {
			return nil, err
		}
		var lines [][]byte
		if st.Replies > 0 {
			lines = p.proc.readN(st.Replies, timeout)
		}
		lines = append(lines, p.proc.readQuiet(p.opts.Quiet)...)
		orderReplies(lines)
		return p.finish(st, lines, len(lines)-1)
	}
	text, err := p.substitute(string(st.Host))
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(text)); err != nil {
		return nil, fmt.Errorf("host line after substitution: %w", err)
	}
	lines, reply, err := p.request(compact.Bytes(), timeout)
	if err != nil {
		return nil, err
	}
	return p.finish(st, lines, reply)
}

// request writes one message; for a request it waits for the reply and
// returns every line written until then and the reply's index (-1 when
// none came); for a notification it waits for quiet.
func (p *player) request(line []byte, timeout time.Duration) ([][]byte, int, error) {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	_ = json.Unmarshal(line, &head)
	if err := p.proc.write(append(line, '\n')); err != nil {
		return nil, -1, err
	}
	if head.Method == nil || len(head.ID) == 0 {
		return p.proc.readQuiet(p.opts.Quiet), -1, nil
	}
	want := canonicalID(head.ID)
	lines, idx := p.proc.readUntil(func(b []byte) bool {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(b, &m) != nil || m.Method != nil || len(m.ID) == 0 {
			return false
		}
		return canonicalID(m.ID) == want && (m.Result != nil || m.Error != nil)
	}, timeout)
	return lines, idx, nil
}

// orderReplies sorts, in place, the replies among lines by their id,
// leaving every other line where it is. Requests written together in one
// raw line are served concurrently by both workers, so the order of their
// replies is a race on either side, not a difference between them.
func orderReplies(lines [][]byte) {
	var at []int
	var replies [][]byte
	var keys []string
	for i, b := range lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if json.Unmarshal(b, &m) != nil || m.Method != nil || len(m.ID) == 0 || string(m.ID) == "null" {
			continue
		}
		at = append(at, i)
		replies = append(replies, b)
		keys = append(keys, canonicalID(m.ID))
	}
	idx := make([]int, len(replies))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
	for k, pos := range at {
		lines[pos] = replies[idx[k]]
	}
}

func canonicalID(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// finish captures from the reply, then normalises the lines.
func (p *player) finish(st *Step, raw [][]byte, reply int) (*StepOutput, error) {
	decoded := make([]any, len(raw))
	for i, b := range raw {
		decoded[i] = decodeLine(b)
	}
	if len(st.Capture) > 0 {
		if reply < 0 || reply >= len(decoded) {
			return nil, fmt.Errorf("capture: the step got no reply")
		}
		for name, path := range st.Capture {
			v, err := lookup(decoded[reply], path)
			if err != nil {
				return nil, fmt.Errorf("capture %s: %w", name, err)
			}
			if s, ok := v.(string); ok {
				p.vars[name] = s
				delete(p.jsonVars, name)
			} else {
				b, _ := json.Marshal(v)
				p.jsonVars[name] = b
				delete(p.vars, name)
			}
		}
	}
	out := &StepOutput{}
	for _, v := range decoded {
		out.Lines = append(out.Lines, p.repl.normalize(v))
	}
	out.Lines = joinExecuteLogs(out.Lines)
	if reply < 0 && len(st.Host) > 0 && isRequest(st.Host) {
		out.Lines = append(out.Lines, map[string]any{"refcheck": "no reply"})
	}
	return out, nil
}

func isRequest(raw json.RawMessage) bool {
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	return json.Unmarshal(raw, &head) == nil && head.Method != nil && len(head.ID) > 0 && string(head.ID) != "null"
}

func (p *player) hook(h *Hook) error {
	s := p.env.emu.Server
	resolve := func(v string) (string, error) { return p.substitute(v) }
	switch {
	case h.Fault != nil:
		f := h.Fault
		id, err := resolve(f.SandboxID)
		if err != nil {
			return err
		}
		s.AddFault(emulator.Fault{Method: f.Method, Path: f.Path, SandboxID: id, Times: f.Times,
			Latency: time.Duration(f.LatencyMs) * time.Millisecond, Status: f.Status, Body: f.Body, EmptyBody: f.EmptyBody,
			Hang: f.Hang, Reset: f.Reset, ResetAfterBytes: f.ResetAfterBytes, RetryAfter: f.RetryAfter,
			DropWebSocketAfterBytes: f.DropWebSocketAfterBytes, Command: f.Command})
	case h.ClearFaults:
		s.ClearFaults()
	case h.Stop != "":
		id, err := resolve(h.Stop)
		if err != nil {
			return err
		}
		return s.StopBehindClientsBack(id)
	case h.Delete != "":
		id, err := resolve(h.Delete)
		if err != nil {
			return err
		}
		req, _ := http.NewRequest(http.MethodDelete, p.vars["DAYTONA_API_URL"]+"/sandbox/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+p.vars["DAYTONA_API_KEY"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("hook delete %s: %s", id, resp.Status)
		}
	case h.SetError != nil:
		id, err := resolve(h.SetError.ID)
		if err != nil {
			return err
		}
		return s.SetError(id, h.SetError.Reason, h.SetError.Recoverable)
	case h.MissingContainer != "":
		id, err := resolve(h.MissingContainer)
		if err != nil {
			return err
		}
		return s.SetMissingContainer(id)
	default:
		return errors.New("empty hook")
	}
	return nil
}

// emulatorEnv is one side's emulator, served on loopback.
type emulatorEnv struct {
	emu    *emulator.Loopback
	url    string // http://127.0.0.1:PORT
	root   string
	closed string // an address nothing listens on
}

func startEmulator(setup transcript.EmulatorSetup) (*emulatorEnv, error) {
	nop := zerolog.Nop()
	opts := emulator.Options{Logger: &nop, ReturnTransitional: setup.Transitional}
	if setup.StepDelayMs > 0 {
		opts.StepDelay = time.Duration(setup.StepDelayMs) * time.Millisecond
	}
	// An address nothing listens on, for the scenarios of an unreachable
	// Daytona.
	closedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	closed := closedLn.Addr().String()
	_ = closedLn.Close()
	l, err := emulator.ServeLoopback(opts)
	if err != nil {
		return nil, err
	}
	return &emulatorEnv{emu: l, url: l.URL, root: l.Root(), closed: closed}, nil
}

func (e *emulatorEnv) vars() map[string]string {
	addr := strings.TrimPrefix(e.url, "http://")
	return map[string]string{
		"DAYTONA_API_URL": e.url + "/api",
		"DAYTONA_API_KEY": emulator.DevAPIKey,
		"EMULATOR_URL":    e.url,
		"EMULATOR_ADDR":   addr,
		"EMULATOR_ROOT":   e.root,
		"CLOSED_API_URL":  "http://" + e.closed + "/api",
		"CLOSED_ADDR":     e.closed,
	}
}

func (e *emulatorEnv) close() {
	pty.RemoveDiagnostics(e.emu.PTYSessionIDs())
	_ = e.emu.Close()
}

// sandboxesLine describes the emulator's sandboxes once no lifecycle step is
// in progress (or after 5 s).
func (e *emulatorEnv) sandboxesLine() ([]byte, error) {
	deadline := time.Now().Add(5 * time.Second)
	var views []emulator.SandboxView
	for {
		views = e.emu.Sandboxes()
		settled := true
		for _, v := range views {
			if strings.HasSuffix(v.State, "ing") {
				settled = false
			}
		}
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	type view struct {
		Name                string            `json:"name"`
		State               string            `json:"state"`
		Labels              map[string]string `json:"labels"`
		Snapshot            string            `json:"snapshot"`
		Target              string            `json:"target"`
		AutoStopInterval    int               `json:"autoStopInterval"`
		AutoArchiveInterval int               `json:"autoArchiveInterval"`
		AutoDeleteInterval  int               `json:"autoDeleteInterval"`
		Processes           int               `json:"processes"`
		Sessions            int               `json:"sessions"`
	}
	list := make([]view, 0, len(views))
	for _, v := range views {
		list = append(list, view{Name: v.Name, State: v.State, Labels: v.Labels, Snapshot: v.Snapshot,
			Target: v.Target, AutoStopInterval: v.AutoStopInterval, AutoArchiveInterval: v.AutoArchiveInterval,
			AutoDeleteInterval: v.AutoDeleteInterval, Processes: v.Processes, Sessions: v.Sessions})
	}
	return json.Marshal(map[string]any{"sandboxes": list})
}

// process is one running worker.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *lockedBuffer
	done   chan struct{} // closed when stdout ends
	waited chan struct{}
	code   int
	once   sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 4<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func (p *player) spawn(ctx context.Context, c Command) (*process, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("no worker command")
	}
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "NODE_NO_WARNINGS=1"}
	keys := make([]string, 0, len(p.sc.Setup.Env))
	for k := range p.sc.Setup.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := p.substitute(p.sc.Setup.Env[k])
		if err != nil {
			return nil, err
		}
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	pr := &process{cmd: cmd, stdin: stdin, lines: make(chan []byte, 1024), stderr: &lockedBuffer{},
		done: make(chan struct{}), waited: make(chan struct{})}
	cmd.Stderr = pr.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %v: %w", c.Argv, err)
	}
	go func() {
		defer close(pr.done)
		defer close(pr.lines)
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				pr.lines <- bytes.TrimRight(line, "\r\n")
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-pr.done
		err := cmd.Wait()
		pr.code = cmd.ProcessState.ExitCode()
		if err != nil && pr.code == 0 {
			pr.code = -1
		}
		close(pr.waited)
	}()
	return pr, nil
}

func (pr *process) write(b []byte) error {
	_, err := pr.stdin.Write(b)
	return err
}

// readUntil reads lines until match holds for one (its index is returned)
// or timeout passes (-1).
func (pr *process) readUntil(match func([]byte) bool, timeout time.Duration) ([][]byte, int) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	var lines [][]byte
	for {
		select {
		case line, ok := <-pr.lines:
			if !ok {
				return lines, -1
			}
			lines = append(lines, line)
			if match(line) {
				return lines, len(lines) - 1
			}
		case <-t.C:
			return lines, -1
		}
	}
}

func (pr *process) readN(n int, timeout time.Duration) [][]byte {
	count := 0
	lines, _ := pr.readUntil(func([]byte) bool { count++; return count >= n }, timeout)
	return lines
}

// readQuiet reads lines until none comes for quiet.
func (pr *process) readQuiet(quiet time.Duration) [][]byte {
	var lines [][]byte
	for {
		select {
		case line, ok := <-pr.lines:
			if !ok {
				return lines
			}
			lines = append(lines, line)
		case <-time.After(quiet):
			return lines
		}
	}
}

// closeAndWait closes stdin and collects what the worker writes until it
// exits (killing it after timeout).
func (pr *process) closeAndWait(timeout time.Duration) ([][]byte, int) {
	pr.once.Do(func() { _ = pr.stdin.Close() })
	var lines [][]byte
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case line, ok := <-pr.lines:
			if !ok {
				<-pr.waited
				return lines, pr.code
			}
			lines = append(lines, line)
		case <-t.C:
			_ = pr.cmd.Process.Kill()
			<-pr.waited
			return lines, pr.code
		}
	}
}

// stop ends the worker (closing stdin first, then killing it) and returns
// its stderr.
func (pr *process) stop() []byte {
	pr.once.Do(func() { _ = pr.stdin.Close() })
	go func() {
		for range pr.lines { // whatever comes now is not compared
		}
	}()
	select {
	case <-pr.waited:
	case <-time.After(10 * time.Second):
		_ = pr.cmd.Process.Kill()
		<-pr.waited
	}
	return pr.stderr.Bytes()
}
