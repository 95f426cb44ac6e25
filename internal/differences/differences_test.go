package differences

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite README.md's table from differences.txt")

const (
	listFile   = "../../differences.txt"
	readmeFile = "../../README.md"
)

// TestReadmeTableMatchesList keeps README.md's "differs on purpose" table
// generated from differences.txt: a row added to one and not the other fails
// here, and -update rewrites the README from the list.
func TestReadmeTableMatchesList(t *testing.T) {
	l, err := Load(listFile)
	require.NoError(t, err)
	readme, err := os.ReadFile(readmeFile)
	require.NoError(t, err)
	want, err := ReplaceTable(readme, l.Table())
	require.NoError(t, err)
	if *update {
		if !bytes.Equal(want, readme) {
			require.NoError(t, os.WriteFile(readmeFile, want, 0o644))
		}
		return
	}
	if !bytes.Equal(want, readme) {
		t.Fatalf("README.md's differences table is not the one differences.txt generates; edit differences.txt, then run `go test ./internal/differences -update`.\n--- generated:\n%s", l.Table())
	}
}

func TestParse(t *testing.T) {
	l, err := Parse(strings.NewReader(`# a comment
id: first-row
situation: a host does x
node: the reference
  does y
ours: we do z | w

id: second
situation: s
node: n
ours: o
id: third-without-a-blank-line
situation: s
node: n
ours: o
`))
	require.NoError(t, err)
	require.Len(t, l.Rows, 3)
	assert.Equal(t, Row{ID: "first-row", Situation: "a host does x", Node: "the reference does y", Ours: "we do z | w", Line: 2}, l.Rows[0])
	r, ok := l.ByID("second")
	require.True(t, ok)
	assert.Equal(t, "o", r.Ours)
	_, ok = l.ByID("fourth")
	assert.False(t, ok)
	assert.Equal(t, "| situation | Node worker | this worker |\n|---|---|---|\n"+
		"| a host does x | the reference does y | we do z \\| w |\n| s | n | o |\n| s | n | o |\n", l.Table())
}

func TestParseRejects(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"missing field":    {"id: a\nsituation: s\nnode: n\n", "line 1: the row has no ours"},
		"duplicate id":     {"id: a\nsituation: s\nnode: n\nours: o\n\nid: a\nsituation: s\nnode: n\nours: o\n", `line 6: id "a" is already used by the row on line 1`},
		"bad id":           {"id: A b\nsituation: s\nnode: n\nours: o\n", `id "A b" must be lower-case words`},
		"unknown field":    {"id: a\nwhy: s\n", `line 2: want one of id, situation, node, ours followed by ':'`},
		"field twice":      {"id: a\nsituation: s\nsituation: t\nnode: n\nours: o\n", "line 3: situation given twice"},
		"id begins a row":  {"id: a\nid: b\nsituation: s\nnode: n\nours: o\n", "line 1: the row has no situation"},
		"orphan indent":    {"  continued\n", "line 1: an indented line continues no field"},
		"empty value only": {"id: a\nsituation:\nnode: n\nours: o\n", "the row has no situation"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReplaceTable(t *testing.T) {
	readme := []byte("intro\n" + BeginMarker + "\nold table\n" + EndMarker + "\nafter\n")
	got, err := ReplaceTable(readme, "| new |\n")
	require.NoError(t, err)
	assert.Equal(t, "intro\n"+BeginMarker+"\n| new |\n"+EndMarker+"\nafter\n", string(got))
	_, err = ReplaceTable([]byte("no markers"), "x")
	assert.ErrorIs(t, err, ErrNoMarkers)
}

// TestListFileLoads makes a syntax error in differences.txt name its line.
func TestListFileLoads(t *testing.T) {
	path, err := filepath.Abs(listFile)
	require.NoError(t, err)
	l, err := Load(path)
	require.NoError(t, err)
	assert.NotEmpty(t, l.Rows)
}
