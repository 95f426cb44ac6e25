package refcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
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
	repl := newReplacer(vars)
	tvars := scenario.Vars{}
	for k, v := range vars {
		tvars[k] = scenario.StringVar(v)
	}
	tvars["CFG"], _ = json.Marshal(map[string]string{"apiKey": vars["DAYTONA_API_KEY"], "apiUrl": vars["DAYTONA_API_URL"]})

	proc, err := spawn(ctx, cmd, sc.Setup.Env, tvars)
	if err != nil {
		return nil, err
	}
	defer func() {
		stderr := stop(proc)
		if opts.Stderr != nil {
			opts.Stderr(sc.Name, side, stderr)
		}
	}()

	steps := sc.Steps
	first := 0
	if !sc.Setup.NoInitialize {
		init := scenario.Step{Host: json.RawMessage(`{"jsonrpc":"2.0","id":"refcheck-init","method":"initialize","params":{"manifest":{},"config":{},"instanceInfo":{"instanceId":"refcheck","hostVersion":"1"},"apiVersion":1}}`)}
		steps, first = append([]Step{init}, sc.Steps...), 1
	}
	outputs := make([]*StepOutput, len(sc.Steps))
	player := &scenario.Player{
		Worker:  proc,
		Vars:    tvars,
		Timeout: opts.ReplyTimeout,
		Quiet:   opts.Quiet,
		RunHook: func(text string, _ scenario.Vars) error {
			act, err := parseHook(text)
			if err != nil {
				return err
			}
			return act(env)
		},
		Inspect: func(st *Step) ([]byte, error) {
			if st.Sandboxes {
				return env.sandboxesLine()
			}
			return filesStepLine(st, tvars)
		},
		Collect: func(i int, lines [][]byte, reply int) error {
			if i < first {
				return nil
			}
			out, err := finish(&steps[i], lines, reply, tvars, repl)
			outputs[i-first] = out
			return err
		},
	}
	if _, err := player.Play(steps); err != nil {
		var pe *scenario.PlayError
		if errors.As(err, &pe) {
			return outputs, fmt.Errorf("%s:%d: %w", sc.Path, pe.Line, pe.Err)
		}
		return outputs, err
	}
	return outputs, nil
}

// filesStepLine lists the folder a files step names, its variables
// substituted.
func filesStepLine(st *Step, vars scenario.Vars) ([]byte, error) {
	dir, err := scenario.SubstituteText(st.Files, vars)
	if err != nil {
		return nil, err
	}
	return filesLine(dir), nil
}

// finish captures from the reply, then normalises the lines.
func finish(st *Step, raw [][]byte, reply int, vars scenario.Vars, repl *replacer) (*StepOutput, error) {
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
			vars[name], _ = json.Marshal(v)
		}
	}
	out := &StepOutput{}
	for _, v := range decoded {
		out.Lines = append(out.Lines, repl.normalize(v))
	}
	out.Lines = joinExecuteLogs(out.Lines)
	if reply < 0 && len(st.Host) > 0 && scenario.RequestID(st.Host) != nil {
		out.Lines = append(out.Lines, map[string]any{"refcheck": "no reply"})
	}
	return out, nil
}

// delete deletes a sandbox through the API, as another client would.
func (e *emulatorEnv) delete(id string) error {
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/api/sandbox/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+emulator.DevAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("hook delete %s: %s", id, resp.Status)
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

func startEmulator(setup scenario.EmulatorSetup) (*emulatorEnv, error) {
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

// spawn starts one worker with the environment refcheck gives both sides
// and the scenario's own, its variables substituted.
func spawn(ctx context.Context, c Command, extra map[string]string, vars scenario.Vars) (*workerhost.Process, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("no worker command")
	}
	env := []string{"HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "NODE_NO_WARNINGS=1"}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := scenario.Substitute([]byte(extra[k]), vars)
		if err != nil {
			return nil, err
		}
		env = append(env, k+"="+string(v))
	}
	return workerhost.Start(ctx, workerhost.Command{Path: c.Argv[0], Args: c.Argv[1:], Env: env})
}

// stop ends the worker (closing stdin first, then killing it after a
// while) and returns its stderr.
func stop(p *workerhost.Process) []byte {
	_ = p.CloseStdin()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = p.Wait(ctx)
	_ = p.Close()
	return []byte(p.Stderr())
}
