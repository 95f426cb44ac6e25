package sync

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/node-posix-path.json holds Node 20's answers for path.posix
// normalize, dirname, isAbsolute and join over combinations of tricky
// segments; the ports must agree with every one.
func TestNodePosixPathAgreesWithNode(t *testing.T) {
	raw, err := os.ReadFile("testdata/node-posix-path.json")
	require.NoError(t, err)
	var cases [][]any
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.Greater(t, len(cases), 1000)
	for _, c := range cases {
		in := c[0].(string)
		assert.Equal(t, c[1], nodeNormalize(in), "normalize(%q)", in)
		assert.Equal(t, c[2], nodeDirname(in), "dirname(%q)", in)
		assert.Equal(t, c[3], nodeIsAbsolute(in), "isAbsolute(%q)", in)
		assert.Equal(t, c[4], nodeJoin(in, "q"), "join(%q, q)", in)
		assert.Equal(t, c[5], nodeJoin("/r", in), "join(/r, %q)", in)
	}
}

func TestShellQuoteAndOctalMode(t *testing.T) {
	assert.Equal(t, `'plain'`, shellQuote("plain"))
	assert.Equal(t, `'it'"'"'s'`, shellQuote("it's"))
	assert.Equal(t, `'$(x) "y" \z'`, shellQuote(`$(x) "y" \z`))
	assert.Equal(t, "600", octalMode(0o600))
	assert.Equal(t, "4755", octalMode(0o4755))
	assert.Equal(t, "000", octalMode(0))
	assert.Equal(t, "7", octalMode(0o7)[2:])
	assert.Equal(t, "644", octalMode(0o100644), "the type bits are masked off")
}

func TestCheckConfined(t *testing.T) {
	const root = "/home/daytona/paperclip-workspace"
	ok := []string{root, root + "/a", root + "/a/b.txt", root + "/./a", root + "//a", root + "/"}
	for _, p := range ok {
		assert.NoError(t, checkConfined(root, p, "source"), p)
	}
	tests := []struct{ path, err string }{
		{"relative/a", "Daytona sync source path is not a confined absolute path: relative/a"},
		{"..", "Daytona sync source path is not a confined absolute path: .."},
		{root + "/a/../b", "Daytona sync source path is not a confined absolute path: " + root + "/a/../b"},
		{root + "/..", "Daytona sync source path is not a confined absolute path: " + root + "/.."},
		{"/etc/passwd", "Daytona sync source path escapes the workspace remote dir: /etc/passwd"},
		{root + "-sibling/x", "Daytona sync source path escapes the workspace remote dir: " + root + "-sibling/x"},
		{"/home/daytona", "Daytona sync source path escapes the workspace remote dir: /home/daytona"},
		{root + "/a\x00b", "Daytona sync source path is not a confined absolute path: " + root + "/a\x00b"},
	}
	for _, tt := range tests {
		assert.EqualError(t, checkConfined(root, tt.path, "source"), tt.err)
	}
	// The plugin's quirk: a root with a trailing slash refuses itself
	// without it (Node's normalize keeps the slash).
	assert.Error(t, checkConfined("/ws/", "/ws", "source"))
	assert.NoError(t, checkConfined("/ws/", "/ws/x", "source"))
}

// A failed rename names both paths, as Node's fs.rename words it.
func TestNodeRenameError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from, to := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	require.NoError(t, os.WriteFile(from, nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(to, "inner"), 0o755))
	err := syscall.Rename(from, to)
	require.Error(t, err)
	assert.EqualError(t, nodeRenameError(from, to, err),
		"EISDIR: illegal operation on a directory, rename '"+from+"' -> '"+to+"'")
}
