package refcheck

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/paperclipai/daytona-worker/internal/differences"
)

// Verdict classifies one scenario.
type Verdict string

const (
	Identical  Verdict = "identical"
	Documented Verdict = "documented"
	Different  Verdict = "different"
)

// Result is one scenario's comparison.
type Result struct {
	Scenario *Scenario
	Verdict  Verdict
	// Rows are the differences.txt rows that account for the differences
	// seen (Documented), in first-seen order.
	Rows []string
	// Undocumented are the differences no declared row covers (Different).
	Undocumented []StepDifference
	// Stale are declared differences that did not occur: the declaration can
	// go (or the scenario no longer shows what it was written for).
	Stale []string
	// Problem is a harness failure on either side (Different).
	Problem string
}

// StepDifference is a difference at one step.
type StepDifference struct {
	Step *Step
	Difference
}

// Compare classifies a scenario from both sides' outputs.
func Compare(sc *Scenario, ref, ours []*StepOutput, list *differences.List) *Result {
	r := &Result{Scenario: sc, Verdict: Identical}
	seenRows := map[string]bool{}
	for i := range sc.Steps {
		st := &sc.Steps[i]
		for row := range st.Differs {
			if _, ok := list.ByID(row); !ok {
				r.Problem = fmt.Sprintf("line %d names %q, which is no row of differences.txt", st.Line, row)
				r.Verdict = Different
				return r
			}
		}
		if !st.CollectsOutput() {
			continue
		}
		var a, b []any
		if i < len(ref) && ref[i] != nil {
			a = ref[i].Lines
		}
		if i < len(ours) && ours[i] != nil {
			b = ours[i].Lines
		}
		used := map[string]bool{}
		for _, d := range diffOutputs(a, b) {
			row := coveringRow(st, d.Path)
			if row == "" {
				r.Undocumented = append(r.Undocumented, StepDifference{Step: st, Difference: d})
				continue
			}
			used[row] = true
			if !seenRows[row] {
				seenRows[row] = true
				r.Rows = append(r.Rows, row)
			}
		}
		for _, row := range sortedKeys(st.Differs) {
			if !used[row] {
				r.Stale = append(r.Stale, fmt.Sprintf("line %d: %s", st.Line, row))
			}
		}
	}
	switch {
	case len(r.Undocumented) > 0:
		r.Verdict = Different
	case len(r.Rows) > 0:
		r.Verdict = Documented
	}
	return r
}

func coveringRow(st *Step, path string) string {
	for _, row := range sortedKeys(st.Differs) {
		for _, declared := range st.Differs[row] {
			if covers(declared, path) {
				return row
			}
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Print writes one scenario's line (and, for a difference, both sides).
func (r *Result) Print(w io.Writer, list *differences.List) {
	fmt.Fprintf(w, "%-10s  %s", r.Verdict, r.Scenario.Name)
	if r.Verdict == Documented {
		var names []string
		for _, id := range r.Rows {
			row, _ := list.ByID(id)
			names = append(names, fmt.Sprintf("%s (%q)", id, row.Situation))
		}
		fmt.Fprintf(w, "  — rows of differences.txt: %s", strings.Join(names, "; "))
	}
	fmt.Fprintln(w)
	if r.Problem != "" {
		fmt.Fprintf(w, "    %s\n", r.Problem)
	}
	for _, d := range r.Undocumented {
		fmt.Fprintf(w, "    line %d %s: %s\n", d.Step.Line, stepLabel(d.Step), d.Path)
		fmt.Fprintf(w, "      reference: %s\n", render(d.Reference))
		fmt.Fprintf(w, "      worker:    %s\n", render(d.Worker))
	}
	for _, s := range r.Stale {
		fmt.Fprintf(w, "    note: declared difference did not occur (%s)\n", s)
	}
}

func stepLabel(st *Step) string {
	switch {
	case len(st.Host) > 0:
		var head struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(st.Host, &head)
		return "(" + head.Method + ")"
	case st.HostRaw != nil:
		return "(raw line)"
	case st.Sandboxes:
		return "(sandboxes)"
	case st.CloseStdin:
		return "(close stdin)"
	}
	return ""
}

func render(v any) string {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	b := strings.TrimSuffix(buf.String(), "\n")
	const max = 600
	if len(b) > max {
		return b[:max] + fmt.Sprintf("… (%d bytes)", len(b))
	}
	return b
}

// Summary counts the verdicts.
type Summary struct {
	Identical, Documented, Different int
}

// Add counts one result.
func (s *Summary) Add(r *Result) {
	switch r.Verdict {
	case Identical:
		s.Identical++
	case Documented:
		s.Documented++
	default:
		s.Different++
	}
}

func (s Summary) String() string {
	return fmt.Sprintf("refcheck: %d scenarios: %d identical, %d documented, %d different",
		s.Identical+s.Documented+s.Different, s.Identical, s.Documented, s.Different)
}
