// Package differences reads differences.txt, the one list of the worker's
// deliberate differences from the Node reference worker, and renders it as
// docs/differences.md. refcheck cites its rows by id; a test keeps the
// document in step with the list.
//
// The file is a sequence of blocks separated by blank lines. Each block has
// the fields id, situation, node and ours, one "name: value" line each; an
// id line always begins a new block. A line indented by two spaces continues
// the field above it (joined with a space). Lines starting with '#' are
// comments.
package differences

//go:generate go test -run TestDocumentMatchesList -update .

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Row is one deliberate difference.
type Row struct {
	// ID is a short stable name (lower-case words joined by '-').
	ID string
	// Situation is what the host does or meets.
	Situation string
	// Node is what the reference worker really does.
	Node string
	// Ours is what this worker does instead.
	Ours string
	// Line is the row's first line in the file, for messages.
	Line int
}

// List is the parsed file, in file order.
type List struct {
	Rows []Row
	byID map[string]int
}

// ByID returns the row with id.
func (l *List) ByID(id string) (Row, bool) {
	i, ok := l.byID[id]
	if !ok {
		return Row{}, false
	}
	return l.Rows[i], true
}

var idPattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

var fieldNames = []string{"id", "situation", "node", "ours"}

// Load parses the file at path.
func Load(path string) (*List, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// Parse reads the format described in the package comment. Every error names
// its line.
func Parse(r io.Reader) (*List, error) {
	l := &List{byID: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var (
		fields   map[string]string
		last     string
		start    int
		lineNo   int
		problems []error
	)
	fail := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...)))
	}
	flush := func() {
		if fields == nil {
			return
		}
		row := Row{ID: fields["id"], Situation: fields["situation"], Node: fields["node"], Ours: fields["ours"], Line: start}
		for _, name := range fieldNames {
			if strings.TrimSpace(fields[name]) == "" {
				fail(start, "the row has no %s", name)
			}
		}
		switch {
		case row.ID != "" && !idPattern.MatchString(row.ID):
			fail(start, "id %q must be lower-case words joined by '-'", row.ID)
		case row.ID != "":
			if prev, dup := l.byID[row.ID]; dup {
				fail(start, "id %q is already used by the row on line %d", row.ID, l.Rows[prev].Line)
			} else {
				l.byID[row.ID] = len(l.Rows)
			}
		}
		l.Rows = append(l.Rows, row)
		fields, last = nil, ""
	}
	for sc.Scan() {
		lineNo++
		line := strings.TrimRight(sc.Text(), " \t\r")
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case line == "":
			flush()
			continue
		case strings.HasPrefix(line, "  "):
			if last == "" {
				fail(lineNo, "an indented line continues no field")
				continue
			}
			fields[last] += " " + strings.TrimSpace(line)
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !isField(name) {
			fail(lineNo, "want one of %s followed by ':', got %q", strings.Join(fieldNames, ", "), truncate(line, 40))
			continue
		}
		if name == "id" && fields != nil {
			flush() // an id always begins a row, blank line or not
		}
		if fields == nil {
			fields, start = map[string]string{}, lineNo
		}
		if _, dup := fields[name]; dup {
			fail(lineNo, "%s given twice in one row", name)
		}
		fields[name] = strings.TrimSpace(value)
		last = name
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return l, nil
}

func isField(name string) bool {
	for _, f := range fieldNames {
		if name == f {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Table renders the rows as a Markdown table, one row per difference.
func (l *List) Table() string {
	var b strings.Builder
	b.WriteString("| id | situation | Node worker | this worker |\n|---|---|---|---|\n")
	for _, r := range l.Rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.ID, cell(r.Situation), cell(r.Node), cell(r.Ours))
	}
	return b.String()
}

// cell escapes what would end a table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// documentHead opens docs/differences.md, before the table.
const documentHead = `# Deliberate differences from the Node plugin

<!-- Generated from differences.txt by "go generate ./internal/differences"; edit that file, not this one. -->

Everything the host can observe follows the Node plugin, except where the plugin is fragile and
this worker does better on purpose. Each such difference is one row below, kept in
[differences.txt](../differences.txt). A make refcheck scenario cites a row by its id when it
declares a difference; an output difference that no row names fails the check. See
[behaviour.md](behaviour.md) for how the worker behaves beyond these rows.

`

// Document renders docs/differences.md.
func (l *List) Document() string {
	return documentHead + l.Table()
}
