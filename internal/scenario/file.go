package scenario

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Step is one step of a scenario: a keyword line, any indented lines that
// continue its value, and any indented option lines.
type Step struct {
	// Scenario is the optional header of a refcheck scenario.
	Scenario *Setup

	Host       json.RawMessage
	HostRaw    *string
	Worker     json.RawMessage
	Unordered  []json.RawMessage
	ExecuteLog *ExecuteLogStep
	CloseStdin bool
	Signal     string
	Exit       *int
	SleepMs    int
	// Hook names an action of the caller's, with its arguments: "heal",
	// "state LEASE stopped", `fault {"status": 500}`.
	Hook      string
	Sandboxes bool
	// Files lists a folder of this machine (a sandbox's, or ${HOST_DIR}).
	Files string

	// Options of a step whose output is collected (refcheck mode).
	Replies   int
	Capture   map[string]string
	Differs   map[string][]string
	TimeoutMs int

	// Comment holds a blank or '#' line verbatim; such steps do nothing.
	Comment *string
	// Line is the step's 1-based line number in its file.
	Line int
	// text is the step's original lines, kept so rewrites do not reformat it.
	text string
}

// Setup is a refcheck scenario's header: the workers' extra environment
// (values may use variables), emulator options, and whether the scenario
// sends initialize itself.
type Setup struct {
	Env          map[string]string `json:"env,omitempty"`
	Emulator     EmulatorSetup     `json:"emulator,omitzero"`
	NoInitialize bool              `json:"no_initialize,omitempty"`
}

// EmulatorSetup selects emulator options.
type EmulatorSetup struct {
	Transitional bool `json:"transitional,omitempty"`
	StepDelayMs  int  `json:"step_delay_ms,omitempty"`
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

func (s Step) isExpectation() bool {
	return s.Worker != nil || s.Unordered != nil || s.ExecuteLog != nil
}

// CollectsOutput reports whether the step's output is collected in
// refcheck mode.
func (s Step) CollectsOutput() bool {
	return s.Host != nil || s.HostRaw != nil || s.Sandboxes || s.CloseStdin || s.Files != ""
}

// kinds are the step keywords; options are the indented modifiers.
var (
	kinds   = []string{"scenario", "host", "host_raw", "worker", "unordered", "execute_log", "close_stdin", "signal", "exit", "sleep_ms", "hook", "sandboxes", "files"}
	options = []string{"replies", "capture", "differs", "timeout_ms"}
)

func isOption(line string) bool {
	word, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	return slices.Contains(options, word)
}

// Parse reads a scenario.
func Parse(r io.Reader) ([]Step, error) {
	var steps []Step
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	sawStep := false
	indented := func(l string) bool { return l != "" && (l[0] == ' ' || l[0] == '\t') && strings.TrimSpace(l) != "" }
	for i := 0; i < len(lines); i++ {
		text := lines[i]
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || strings.HasPrefix(text, "#") {
			steps = append(steps, Step{Comment: &lines[i], Line: i + 1})
			continue
		}
		if indented(text) {
			return nil, fmt.Errorf("line %d: an indented line continues a step, and none came before", i+1)
		}
		// The step's value continues on indented lines up to its options.
		first := i
		value := []string{text}
		for i+1 < len(lines) && indented(lines[i+1]) && !isOption(lines[i+1]) {
			i++
			value = append(value, strings.TrimSpace(lines[i]))
		}
		var opts []string
		for i+1 < len(lines) && indented(lines[i+1]) {
			i++
			if !isOption(lines[i]) {
				return nil, fmt.Errorf("line %d: only options (%s) may follow a step's options", i+1, strings.Join(options, ", "))
			}
			opts = append(opts, strings.TrimSpace(lines[i]))
		}
		s, err := parseStep(strings.Join(value, "\n"), opts)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", first+1, err)
		}
		s.Line, s.text = first+1, strings.Join(lines[first:i+1], "\n")
		if s.Scenario != nil && sawStep {
			return nil, fmt.Errorf("line %d: the scenario header must come first", first+1)
		}
		sawStep = true
		steps = append(steps, s)
	}
	return steps, nil
}

func parseStep(text string, opts []string) (Step, error) {
	var s Step
	kind := text
	if i := strings.IndexAny(text, " \n"); i >= 0 {
		kind = text[:i]
	}
	value := strings.TrimSpace(strings.TrimPrefix(text, kind))
	needValue := func() error {
		if value == "" {
			return fmt.Errorf("%s needs a value", kind)
		}
		return nil
	}
	var err error
	switch kind {
	case "scenario":
		s.Scenario = &Setup{}
		err = decodeStrict(value, s.Scenario)
	case "host":
		s.Host, err = rawJSON(value)
	case "worker":
		s.Worker, err = rawJSON(value)
	case "host_raw":
		s.HostRaw = new(string)
		err = decodeStrict(value, s.HostRaw)
	case "unordered":
		err = decodeStrict(value, &s.Unordered)
		if err == nil && s.Unordered == nil {
			err = errors.New("unordered needs an array")
		}
	case "execute_log":
		s.ExecuteLog = &ExecuteLogStep{}
		err = decodeStrict(value, s.ExecuteLog)
	case "close_stdin":
		s.CloseStdin = true
	case "sandboxes":
		s.Sandboxes = true
	case "signal":
		s.Signal, err = value, needValue()
	case "hook":
		s.Hook, err = value, needValue()
	case "files":
		s.Files, err = value, needValue()
	case "exit":
		s.Exit = new(int)
		*s.Exit, err = strconv.Atoi(value)
	case "sleep_ms":
		s.SleepMs, err = positive(value)
	default:
		return s, fmt.Errorf("unknown step %q (one of %s)", kind, strings.Join(kinds, ", "))
	}
	if err != nil {
		return s, fmt.Errorf("%s: %w", kind, err)
	}
	if (kind == "close_stdin" || kind == "sandboxes") && value != "" {
		return s, fmt.Errorf("%s takes no value", kind)
	}
	for _, o := range opts {
		name, v, _ := strings.Cut(o, " ")
		v = strings.TrimSpace(v)
		switch name {
		case "replies":
			s.Replies, err = positive(v)
		case "timeout_ms":
			s.TimeoutMs, err = positive(v)
		case "capture":
			err = decodeStrict(v, &s.Capture)
		case "differs":
			err = decodeStrict(v, &s.Differs)
		}
		if err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
	}
	if len(opts) > 0 && !s.CollectsOutput() {
		return s, fmt.Errorf("%s takes no options", kind)
	}
	if s.Replies > 0 && s.HostRaw == nil {
		return s, errors.New("replies is for host_raw")
	}
	for row, paths := range s.Differs {
		if len(paths) == 0 {
			return s, fmt.Errorf("differs %q names no path", row)
		}
		for _, p := range paths {
			if p != "$lines" && !strings.HasPrefix(p, "$") {
				return s, fmt.Errorf("differs %q: path %q must start with $", row, p)
			}
		}
	}
	return s, nil
}

func positive(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err == nil && n <= 0 {
		err = fmt.Errorf("%d is not positive", n)
	}
	return n, err
}

func rawJSON(value string) (json.RawMessage, error) {
	if !json.Valid([]byte(value)) {
		var v any
		return nil, json.Unmarshal([]byte(value), &v)
	}
	if strings.Contains(value, "\n") {
		// A value written over several lines is still one message a line
		// on the wire: its line breaks are JSON white space.
		var c bytes.Buffer
		_ = json.Compact(&c, []byte(value)) // valid, checked above
		return c.Bytes(), nil
	}
	return json.RawMessage(value), nil
}

func decodeStrict(value string, v any) error {
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("text after the value")
	}
	return nil
}

// ParseFile reads a scenario file.
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

// Write writes steps, keeping unchanged steps byte for byte.
func Write(w io.Writer, steps []Step) error {
	bw := bufio.NewWriter(w)
	for _, s := range steps {
		text, err := s.Format()
		if err != nil {
			return err
		}
		bw.WriteString(text)
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

// Format returns a step as Write writes it: its original text, or, for a
// step made anew, its keyword, value and options.
func (s Step) Format() (string, error) {
	if s.Comment != nil {
		return *s.Comment, nil
	}
	if s.text != "" {
		return s.text, nil
	}
	var b strings.Builder
	var err error
	put := func(kind string, v any) {
		b.WriteString(kind)
		var j []byte
		switch v := v.(type) {
		case nil:
			return
		case string: // a word, written as it is
			j = []byte(v)
		case json.RawMessage:
			var c bytes.Buffer
			err = errors.Join(err, json.Compact(&c, v))
			j = c.Bytes()
		default:
			var e error
			j, e = marshal(v)
			err = errors.Join(err, e)
		}
		b.WriteByte(' ')
		b.Write(j)
	}
	switch {
	case s.Scenario != nil:
		put("scenario", s.Scenario)
	case s.Host != nil:
		put("host", s.Host)
	case s.HostRaw != nil:
		j, e := marshal(*s.HostRaw)
		err = e
		put("host_raw", json.RawMessage(j))
	case s.Worker != nil:
		put("worker", s.Worker)
	case s.Unordered != nil:
		// One message a line, so that a change shows as the message it is.
		b.WriteString("unordered [")
		for i, m := range s.Unordered {
			var c bytes.Buffer
			err = errors.Join(err, json.Compact(&c, m))
			b.WriteString("\n  " + c.String())
			if i < len(s.Unordered)-1 {
				b.WriteByte(',')
			}
		}
		b.WriteString("]")
	case s.ExecuteLog != nil:
		put("execute_log", s.ExecuteLog)
	case s.CloseStdin:
		put("close_stdin", nil)
	case s.Sandboxes:
		put("sandboxes", nil)
	case s.Signal != "":
		put("signal", s.Signal)
	case s.Exit != nil:
		put("exit", strconv.Itoa(*s.Exit))
	case s.SleepMs > 0:
		put("sleep_ms", strconv.Itoa(s.SleepMs))
	case s.Hook != "":
		put("hook", s.Hook)
	case s.Files != "":
		put("files", s.Files)
	default:
		return "", errors.New("an empty step")
	}
	for _, o := range []struct {
		name string
		set  bool
		v    any
	}{{"replies", s.Replies > 0, strconv.Itoa(s.Replies)}, {"timeout_ms", s.TimeoutMs > 0, strconv.Itoa(s.TimeoutMs)},
		{"capture", s.Capture != nil, s.Capture}, {"differs", s.Differs != nil, s.Differs}} {
		if o.set {
			put("\n  "+o.name, o.v)
		}
	}
	return b.String(), err
}

// marshal writes compact JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
