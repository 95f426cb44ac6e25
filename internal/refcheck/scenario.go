package refcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/transcript"
)

// Scenario is one host situation, played through both workers.
type Scenario struct {
	Name  string // the file name without .jsonl
	Path  string
	Notes string // the file's leading comment lines
	Setup transcript.Setup
	Steps []Step
}

// Step is one step of a scenario.
type Step = transcript.Step

// Hook acts on an emulator behind the worker's back: "fault {…}",
// "clear-faults", "stop ID", "delete ID", "set-error {…}",
// "missing-container ID".
type Hook struct {
	Fault            *FaultSpec
	ClearFaults      bool
	Stop             string
	Delete           string
	SetError         *SetError
	MissingContainer string
}

// FaultSpec is an emulator.Fault in JSON.
type FaultSpec struct {
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

// SetError puts a sandbox in the error state.
type SetError struct {
	ID          string `json:"id"`
	Reason      string `json:"reason"`
	Recoverable bool   `json:"recoverable"`
}

// ParseHook reads a hook step's text.
func ParseHook(text string) (*Hook, error) {
	name, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	h := &Hook{}
	decode := func(v any) error {
		dec := json.NewDecoder(strings.NewReader(arg))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	var err error
	switch name {
	case "fault":
		h.Fault = &FaultSpec{}
		err = decode(h.Fault)
	case "set-error":
		h.SetError = &SetError{}
		err = decode(h.SetError)
	case "clear-faults":
		h.ClearFaults = true
		if arg != "" {
			err = errors.New("clear-faults takes no argument")
		}
	case "stop":
		h.Stop = arg
	case "delete":
		h.Delete = arg
	case "missing-container":
		h.MissingContainer = arg
	default:
		return nil, fmt.Errorf("unknown hook %q (fault, clear-faults, stop, delete, set-error, missing-container)", name)
	}
	if err == nil && arg == "" && !h.ClearFaults {
		err = errors.New("needs an argument")
	}
	if err != nil {
		return nil, fmt.Errorf("hook %s: %w", name, err)
	}
	return h, nil
}

// LoadDir loads every *.jsonl scenario under dir, sorted by name.
func LoadDir(dir string) ([]*Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("refcheck: no scenarios (*.jsonl) in %s", dir)
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
	steps, err := transcript.ParseFile(path)
	if err != nil {
		return nil, err
	}
	s := &Scenario{Name: strings.TrimSuffix(filepath.Base(path), ".jsonl"), Path: path}
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
			if _, err := ParseHook(st.Hook); err != nil {
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
