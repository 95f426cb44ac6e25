package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Step is one line of a transcript.
type Step struct {
	Host       json.RawMessage   `json:"host,omitempty"`
	HostRaw    *string           `json:"host_raw,omitempty"`
	Worker     json.RawMessage   `json:"worker,omitempty"`
	Unordered  []json.RawMessage `json:"unordered,omitempty"`
	CloseStdin bool              `json:"close_stdin,omitempty"`
	Signal     string            `json:"signal,omitempty"`
	Exit       *int              `json:"exit,omitempty"`
	SleepMs    int               `json:"sleep_ms,omitempty"`
	Hook       string            `json:"hook,omitempty"`
	ExecuteLog *ExecuteLogStep   `json:"execute_log,omitempty"`

	// Comment holds a blank or '#' line verbatim; such steps do nothing.
	Comment *string `json:"-"`
	// Line is the step's 1-based line number in its file.
	Line int `json:"-"`
	// text is the original line, kept so rewrites do not reformat it.
	text string
}

func (s Step) isExpectation() bool {
	return s.Worker != nil || s.Unordered != nil || s.ExecuteLog != nil
}

// ExecuteLogStep expects a run of execute.log notifications of one
// invocation whose chunks, joined per stream, are Stdout and Stderr: how a
// command's output is cut into chunks depends on timing, what it adds up to
// does not.
type ExecuteLogStep struct {
	Invocation string `json:"invocation"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
}

// kinds counts the members set, to reject ambiguous steps.
func (s Step) kinds() int {
	n := 0
	for _, set := range []bool{s.Host != nil, s.HostRaw != nil, s.Worker != nil, s.Unordered != nil,
		s.CloseStdin, s.Signal != "", s.Exit != nil, s.SleepMs != 0, s.Hook != "", s.ExecuteLog != nil} {
		if set {
			n++
		}
	}
	return n
}

// Parse reads a transcript.
func Parse(r io.Reader) ([]Step, error) {
	var steps []Step
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			steps = append(steps, Step{Comment: &text, Line: n})
			continue
		}
		var s Step
		dec := json.NewDecoder(strings.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if s.kinds() != 1 {
			return nil, fmt.Errorf("line %d: a step must have exactly one of host, host_raw, worker, unordered, execute_log, close_stdin, signal, exit, sleep_ms, hook", n)
		}
		s.Line, s.text = n, trimmed
		steps = append(steps, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read transcript: %w", err)
	}
	return steps, nil
}

// ParseFile reads a transcript file.
func ParseFile(path string) ([]Step, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	steps, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return steps, nil
}

// Write writes steps, keeping unchanged lines byte for byte.
func Write(w io.Writer, steps []Step) error {
	bw := bufio.NewWriter(w)
	for _, s := range steps {
		line, err := s.encode()
		if err != nil {
			return err
		}
		bw.WriteString(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// WriteFile replaces path with steps.
func WriteFile(path string, steps []Step) error {
	var buf bytes.Buffer
	if err := Write(&buf, steps); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func (s Step) encode() (string, error) {
	if s.Comment != nil {
		return *s.Comment, nil
	}
	if s.text != "" {
		return s.text, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, buf.Bytes()); err != nil {
		return "", err
	}
	return compact.String(), nil
}
