package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/rpc"
)

// The result and the notifications' params are written as they stream.
var (
	_ rpc.JSONStreamer = (*Result)(nil)
	_ rpc.JSONStreamer = (*logChunk)(nil)
)

func intPtr(n int) *int { return &n }

// TestResultEncodesProtocolExecuteResult checks that the streaming
// encoder writes exactly what encoding/json writes for
// protocol.ExecuteResult with the same values: one wire shape.
func TestResultEncodesProtocolExecuteResult(t *testing.T) {
	t.Parallel()
	blocks := func(s string) *Buffer {
		b := &Buffer{}
		_, _ = b.Write([]byte(s))
		return b
	}
	big := strings.Repeat("é\x00\"\\<\u2028", 100_000) // past one output block, every escape kind
	for _, tt := range []struct {
		name string
		got  *Result
		want protocol.ExecuteResult
	}{
		{"finished", &Result{ExitCode: intPtr(3), Stdout: blocks("out\n"), Stderr: blocks("err\n"),
			Metadata: map[string]any{"durationMs": 12, "cacheHit": true}},
			protocol.ExecuteResult{ExitCode: intPtr(3), Stdout: "out\n", Stderr: "err\n", Metadata: map[string]any{"durationMs": 12, "cacheHit": true}}},
		{"timed out", &Result{TimedOut: true, Stdout: blocks(""), Stderr: Text("Command timed out after 3 s.\n"),
			Metadata: map[string]any{"durationMs": 3001}},
			protocol.ExecuteResult{TimedOut: true, Stderr: "Command timed out after 3 s.\n", Metadata: map[string]any{"durationMs": 3001}}},
		{"no lease", &Result{ExitCode: intPtr(1), Stderr: Text("No provider lease ID available for execution.")},
			protocol.ExecuteResult{ExitCode: intPtr(1), Stderr: "No provider lease ID available for execution."}},
		{"large and escaped", &Result{ExitCode: intPtr(0), Stdout: blocks(big), Stderr: Text(big), Metadata: map[string]any{}},
			protocol.ExecuteResult{ExitCode: intPtr(0), Stdout: big, Stderr: big, Metadata: map[string]any{}}},
		{"split rune", &Result{ExitCode: intPtr(0), Stdout: blocks(strings.Repeat("a", outputBlockSize-1) + "é")},
			protocol.ExecuteResult{ExitCode: intPtr(0), Stdout: strings.Repeat("a", outputBlockSize-1) + "é"}},
	} {
		got, err := json.Marshal(tt.got)
		require.NoError(t, err, tt.name)
		want, err := json.Marshal(tt.want)
		require.NoError(t, err, tt.name)
		if !assert.True(t, bytes.Equal(want, got), tt.name) {
			t.Logf("%s:\n got %.300s\nwant %.300s", tt.name, got, want)
		}
	}
}
