package differences

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite docs/differences.md from differences.txt")

const (
	listFile     = "../../differences.txt"
	documentFile = "../../docs/differences.md"
)

// TestDocumentMatchesList keeps docs/differences.md generated from
// differences.txt: a row changed in one and not the other fails here, and
// -update (what go generate runs) rewrites the document from the list.
func TestDocumentMatchesList(t *testing.T) {
	l, err := Load(listFile)
	require.NoError(t, err)
	want := l.Document()
	if *update {
		require.NoError(t, os.WriteFile(documentFile, []byte(want), 0o644))
		return
	}
	got, err := os.ReadFile(documentFile)
	require.NoError(t, err)
	if string(got) != want {
		t.Fatalf("docs/differences.md is not what differences.txt generates; edit differences.txt, then run `go generate ./internal/differences`")
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
	assert.Equal(t, "| id | situation | Node worker | this worker |\n|---|---|---|---|\n"+
		"| `first-row` | a host does x | the reference does y | we do z \\| w |\n"+
		"| `second` | s | n | o |\n| `third-without-a-blank-line` | s | n | o |\n", l.Table())
	assert.True(t, strings.HasSuffix(l.Document(), l.Table()))
	assert.True(t, strings.HasPrefix(l.Document(), "# "))
}

func TestParseRejects(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"missing field":    {"id: a\nsituation: s\nnode: n\n", "line 1: the row has no ours"},
		"duplicate id":     {"id: a\nsituation: s\nnode: n\nours: o\n\nid: a\nsituation: s\nnode: n\nours: o\n", `line 6: id "a" is already used by the row on line 1`},
		"bad id":           {"id: A b\nsituation: s\nnode: n\nours: o\n", `id "A b" must be lower-case words`},
		"unknown field":    {"id: a\nwhy: s\n", `line 2: want one of id, situation, node, ours followed by ':'`},
		"long bad line":    {"id: a\n" + strings.Repeat("x", 60) + "\n", `got "` + strings.Repeat("x", 40) + `…"`},
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

// TestListFileLoads makes a syntax error in differences.txt name its line.
func TestListFileLoads(t *testing.T) {
	path, err := filepath.Abs(listFile)
	require.NoError(t, err)
	l, err := Load(path)
	require.NoError(t, err)
	assert.NotEmpty(t, l.Rows)
}

// A file that cannot be read or parsed is an error that names it.
func TestLoadNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
	bad := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte("why: s\n"), 0o600))
	_, err = Load(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad+": line 1")
}
