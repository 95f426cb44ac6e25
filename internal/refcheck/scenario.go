package refcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/scenario"
)

// Scenario is one host situation, played through both workers.
type Scenario struct {
	Name  string // the file name without .scenario
	Path  string
	Notes string // the file's leading comment lines
	Setup scenario.Setup
	Steps []Step
}

// Step is one step of a scenario.
type Step = scenario.Step

// faultSpec is an emulator.Fault in JSON.
type faultSpec struct {
	Method    string `json:"method"`
	Path      string `json:"path"`
	SandboxID string `json:"sandboxId"`
	Times     int    `json:"times"`
	LatencyMs int    `json:"latency_ms"`
	Status    int    `json:"status"`
	Body      string `json:"body"`
	EmptyBody bool   `json:"empty_body"`
	Hang      bool   `json:"hang"`
	// Reset lets the real handler act, then drops the connection (a TCP
	// reset) once ResetAfterBytes of its body went out: 0 drops it before
	// the status line.
	Reset           bool   `json:"reset"`
	ResetAfterBytes int    `json:"reset_after_bytes"`
	RetryAfter      string `json:"retry_after"`
	// DropWebSocketAfterBytes cuts a log or PTY WebSocket without a close
	// frame after that many payload bytes.
	DropWebSocketAfterBytes int `json:"drop_websocket_after_bytes"`
	// Command selects only executes whose command holds this text.
	Command string `json:"command"`
}

// parseHook reads a hook step's text ("fault {…}", "clear-faults",
// "stop ID", "delete ID", `set-error {"id": ID, "reason": "…",
// "recoverable": false}`, "missing-container ID") into the action it takes
// on a side's emulator behind the worker's back.
func parseHook(text string) (func(e *emulatorEnv) error, error) {
	name, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	decode := func(v any) error {
		dec := json.NewDecoder(strings.NewReader(arg))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	hooks := []string{"fault", "clear-faults", "stop", "delete", "set-error", "missing-container"}
	if !slices.Contains(hooks, name) {
		return nil, fmt.Errorf("unknown hook %q (%s)", name, strings.Join(hooks, ", "))
	}
	if arg == "" && name != "clear-faults" {
		return nil, fmt.Errorf("hook %s needs an argument", name)
	}
	switch name {
	case "fault":
		var f faultSpec
		if err := decode(&f); err != nil {
			return nil, fmt.Errorf("hook fault: %w", err)
		}
		return func(e *emulatorEnv) error {
			e.emu.Server.AddFault(emulator.Fault{Method: f.Method, Path: f.Path, SandboxID: f.SandboxID, Times: f.Times,
				Latency: time.Duration(f.LatencyMs) * time.Millisecond, Status: f.Status, Body: f.Body, EmptyBody: f.EmptyBody,
				Hang: f.Hang, Reset: f.Reset, ResetAfterBytes: f.ResetAfterBytes, RetryAfter: f.RetryAfter,
				DropWebSocketAfterBytes: f.DropWebSocketAfterBytes, Command: f.Command})
			return nil
		}, nil
	case "set-error":
		var se struct {
			ID          string `json:"id"`
			Reason      string `json:"reason"`
			Recoverable bool   `json:"recoverable"`
		}
		if err := decode(&se); err != nil {
			return nil, fmt.Errorf("hook set-error: %w", err)
		}
		return func(e *emulatorEnv) error { return e.emu.Server.SetError(se.ID, se.Reason, se.Recoverable) }, nil
	case "clear-faults":
		if arg != "" {
			return nil, errors.New("hook clear-faults takes no argument")
		}
		return func(e *emulatorEnv) error { e.emu.Server.ClearFaults(); return nil }, nil
	case "stop":
		return func(e *emulatorEnv) error { return e.emu.Server.StopBehindClientsBack(arg) }, nil
	case "missing-container":
		return func(e *emulatorEnv) error { return e.emu.Server.SetMissingContainer(arg) }, nil
	}
	return func(e *emulatorEnv) error { return e.delete(arg) }, nil
}

// LoadDir loads every *.scenario scenario under dir, sorted by name.
func LoadDir(dir string) ([]*Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.scenario"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("refcheck: no scenarios (*.scenario) in %s", dir)
	}
	sort.Strings(paths)
	var out []*Scenario
	var errs []error
	for _, p := range paths {
		s, err := Load(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

// Load parses one scenario file. Its steps act and collect output; a
// scenario holds no expectations of its own (the other side is its
// expectation).
func Load(path string) (*Scenario, error) {
	steps, err := scenario.ParseFile(path)
	if err != nil {
		return nil, err
	}
	s := &Scenario{Name: strings.TrimSuffix(filepath.Base(path), ".scenario"), Path: path}
	var notes []string
	for _, st := range steps {
		switch {
		case st.Comment != nil:
			if line := strings.TrimSpace(*st.Comment); len(s.Steps) == 0 && strings.HasPrefix(line, "#") {
				notes = append(notes, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			}
			continue
		case st.Scenario != nil:
			s.Setup = *st.Scenario
			continue
		case st.Worker != nil || st.Unordered != nil || st.ExecuteLog != nil || st.Exit != nil || st.Signal != "":
			return nil, fmt.Errorf("%s:%d: a refcheck scenario compares the two workers and holds no expectations", path, st.Line)
		case st.Hook != "":
			if _, err := parseHook(st.Hook); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, st.Line, err)
			}
		}
		s.Steps = append(s.Steps, st)
	}
	if len(s.Steps) == 0 {
		return nil, fmt.Errorf("%s: no steps", path)
	}
	s.Notes = strings.Join(notes, " ")
	return s, nil
}
