package emulator_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// An execute fault selected by the command's text answers without running
// it; other commands run. It also works through the admin API.
func TestCommandFaults(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	env.Server.AddFault(emulator.Fault{Command: "mv -f", Reply: &emulator.ExecReply{ExitCode: 1, Result: "mv: permission denied"}, Times: 1})
	code, out := c.execute(id, "mv -f a b; touch ran")
	assert.Equal(t, 1, code)
	assert.Equal(t, "mv: permission denied", out)
	code, out = c.execute(id, "echo real")
	assert.Equal(t, 0, code)
	assert.Equal(t, "real\n", out)
	code, _ = c.execute(id, "test -e ran")
	assert.Equal(t, 1, code, "the faulted command never ran")

	r := c.do("POST", env.HTTP.URL+"/_emulator/faults", map[string]any{"command": "secret-cmd", "reply": map[string]any{"exitCode": 42, "result": "ESCAPE"}})
	require.Equal(t, 201, r.status)
	code, out = c.execute(id, "sh -c 'secret-cmd'")
	assert.Equal(t, 42, code)
	assert.Equal(t, "ESCAPE", out)
}

// A gate holds matching requests (several at once) until it is closed,
// then they run for real.
func TestGateFault(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	gate := make(chan struct{})
	env.Server.AddFault(emulator.Fault{Command: "echo gated", Gate: gate})
	results := make(chan string, 2)
	for i := 0; i < 2; i++ {
		go func() { _, out := c.execute(id, "echo gated"); results <- out }()
	}
	testutil.WaitFor(t, "both executes reach the emulator", func() bool {
		return env.Server.Requests()["POST /toolbox/{sandboxId}/process/execute"] == 2
	})
	select {
	case out := <-results:
		t.Fatalf("a gated request answered: %q", out)
	default:
	}
	close(gate)
	for i := 0; i < 2; i++ {
		assert.Equal(t, "gated\n", <-results)
	}
}

// The journal records what each sandbox was asked, in order.
func TestJournal(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	c.execute(id, "mkdir -p d && echo hi > d/f")
	r := c.tb(id, "POST", "/files/permissions?path=d/f&mode=600", nil)
	require.Equal(t, 200, r.status)
	r = c.tb(id, "POST", "/files/bulk-download", map[string]any{"paths": []string{"d/f", "missing"}})
	require.Equal(t, 200, r.status)
	r = c.tb(id, "DELETE", "/files?path=d/f", nil)
	require.Equal(t, 204, r.status)
	j := env.Server.Journal(id)
	require.Len(t, j, 4)
	assert.Equal(t, "execute", j[0].Route)
	assert.True(t, strings.HasPrefix(j[0].Command, "mkdir -p d"))
	assert.Equal(t, emulator.ToolboxCall{Route: "permissions", Paths: []string{"d/f"}, Mode: "600"}, j[1])
	assert.Equal(t, emulator.ToolboxCall{Route: "bulk-download", Paths: []string{"d/f", "missing"}}, j[2])
	assert.Equal(t, emulator.ToolboxCall{Route: "delete", Paths: []string{"d/f"}}, j[3])
	env.Server.ResetJournal(id)
	assert.Empty(t, env.Server.Journal(id))
	assert.Nil(t, env.Server.Journal("nope"))
}

// SetProcessEnv changes what later commands see (a PATH without a tool
// makes the sandbox lack it).
func TestSetProcessEnv(t *testing.T) {
	t.Parallel()
	env, c := start(t, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	require.NoError(t, env.Server.SetProcessEnv(id, map[string]string{"PATH": "/nonexistent"}))
	code, _ := c.execute(id, "realpath /")
	assert.Equal(t, 127, code)
	assert.Error(t, env.Server.SetProcessEnv("nope", nil))
}
