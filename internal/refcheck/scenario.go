package refcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Scenario is one host situation, played through both workers.
type Scenario struct {
	Name  string // the file name without .jsonl
	Path  string
	Notes string // the file's leading comment lines
	Setup Setup
	Steps []Step
}

// Setup is a scenario's optional first line.
type Setup struct {
	Env          map[string]string `json:"env"`
	Emulator     EmulatorSetup     `json:"emulator"`
	NoInitialize bool              `json:"no_initialize"`
}

// EmulatorSetup selects emulator options.
type EmulatorSetup struct {
	Transitional bool `json:"transitional"`
	StepDelayMs  int  `json:"step_delay_ms"`
}

// Step is one line of a scenario.
type Step struct {
	Line int // in the file

	Host       json.RawMessage `json:"host"`
	HostRaw    *string         `json:"host_raw"`
	Replies    int             `json:"replies"`
	Hook       *Hook           `json:"hook"`
	Sandboxes  bool            `json:"sandboxes"`
	CloseStdin bool            `json:"close_stdin"`
	SleepMs    int             `json:"sleep_ms"`
	// Files lists a folder of this machine (a sandbox's, or ${HOST_DIR}).
	Files string `json:"files"`

	Capture   map[string]string   `json:"capture"`
	Differs   map[string][]string `json:"differs"`
	TimeoutMs int                 `json:"timeout_ms"`
}

// Hook acts on an emulator behind the worker's back.
type Hook struct {
	Fault            *FaultSpec `json:"fault"`
	ClearFaults      bool       `json:"clear_faults"`
	Stop             string     `json:"stop"`
	Delete           string     `json:"delete"`
	SetError         *SetError  `json:"set_error"`
	MissingContainer string     `json:"missing_container"`
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

// producesOutput reports whether the step's output is compared.
func (s *Step) producesOutput() bool {
	return len(s.Host) > 0 || s.HostRaw != nil || s.Sandboxes || s.CloseStdin || s.Files != ""
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

// Load parses one scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &Scenario{Name: strings.TrimSuffix(filepath.Base(path), ".jsonl"), Path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	lineNo := 0
	var notes []string
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			if len(s.Steps) == 0 {
				notes = append(notes, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			}
			continue
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &probe); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
		if raw, ok := probe["scenario"]; ok {
			if len(s.Steps) > 0 {
				return nil, fmt.Errorf("%s:%d: the scenario line must come first", path, lineNo)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&s.Setup); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, lineNo, err)
			}
			continue
		}
		var st Step
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
		st.Line = lineNo
		if err := st.validate(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
		s.Steps = append(s.Steps, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(s.Steps) == 0 {
		return nil, fmt.Errorf("%s: no steps", path)
	}
	s.Notes = strings.Join(notes, " ")
	return s, nil
}

func (s *Step) validate() error {
	kinds := 0
	for _, set := range []bool{len(s.Host) > 0, s.HostRaw != nil, s.Hook != nil, s.Sandboxes, s.CloseStdin, s.SleepMs > 0, s.Files != ""} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return errors.New("a step is exactly one of host, host_raw, hook, sandboxes, close_stdin, sleep_ms, files")
	}
	if (len(s.Capture) > 0 || len(s.Differs) > 0) && !s.producesOutput() {
		return errors.New("capture and differs need a step with output")
	}
	for row, paths := range s.Differs {
		if len(paths) == 0 {
			return fmt.Errorf("differs %q names no path", row)
		}
		for _, p := range paths {
			if p != "$lines" && !strings.HasPrefix(p, "$") {
				return fmt.Errorf("differs %q: path %q must start with $", row, p)
			}
		}
	}
	return nil
}
