package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/refcheck"
)

// The scenarios written are valid refcheck scenarios, and the same seed
// writes the same play.
func TestScenariosLoadAndRepeat(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, writeScenarios(a, 3, 2))
	require.NoError(t, writeScenarios(b, 3, 2))
	scs, err := refcheck.LoadDir(a)
	require.NoError(t, err)
	assert.Len(t, scs, 2*len(families))
	for _, sc := range scs {
		x, err := os.ReadFile(filepath.Join(a, sc.Name+".scenario"))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, sc.Name+".scenario"))
		require.NoError(t, err)
		assert.Equal(t, string(x), string(y), sc.Name)
		assert.NotContains(t, string(x), `"remotePath":"/`, "no absolute folder is made on this machine")
	}
}

// A folder that cannot be made, or a scenario file that cannot be
// written, is an error, not a play left out.
func TestWriteScenariosReportsWhatItCannotWrite(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	assert.Error(t, writeScenarios(filepath.Join(file, "dir"), 1, 1))
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "random-config-1.scenario"), 0o755))
	assert.Error(t, writeScenarios(dir, 1, 1))
}

// The triage leaves out an invalid-params refusal where the plugin threw,
// and shows every other difference.
func TestTriageShowsWhatIsNoInvalidParamsRefusal(t *testing.T) {
	t.Parallel()
	out := `different   random-params-1
    line 5 (environmentExecute): $.error.code
      reference: -32002
      worker:    -32602
    line 5 (environmentExecute): $.error.message
      reference: "value.replace is not a function"
      worker:    "Invalid params for environmentExecute: params.cwd must be a string"
    line 9 (environmentRealizeWorkspace): $.error
      reference: "<absent>"
      worker:    {"code":-32002,"message":"daytona: create folder: empty path"}
    line 9 (environmentRealizeWorkspace): $.result
      reference: {"cwd":""}
      worker:    "<absent>"
refcheck: 1 scenarios: 0 identical, 0 documented, 1 different
`
	var b strings.Builder
	require.NoError(t, triageOutput(strings.NewReader(out), &b))
	got := b.String()
	assert.NotContains(t, got, "line 5")
	assert.Contains(t, got, "random-params-1 line 9 (environmentRealizeWorkspace)")
	assert.Contains(t, got, "create folder: empty path")
	assert.Contains(t, got, "refrandom: 1 steps differ beyond invalid params")
}

// The output family's printf formats print exactly their bytes through the
// shell the emulator runs commands with.
func TestPrintfBytesPrintsExactlyTheBytes(t *testing.T) {
	t.Parallel()
	var all []byte
	for _, b := range outputBytes {
		all = append(all, b...)
	}
	for _, b := range append(outputBytes, all) {
		out, err := exec.Command("sh", "-c", "printf '"+printfBytes(b)+"'").Output()
		require.NoError(t, err)
		assert.Equal(t, b, out, "%q", b)
	}
}
