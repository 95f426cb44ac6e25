package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/daytona-worker/internal/scenario"
)

// TestProtocolTranscripts replays the transcripts that need no Daytona.
func TestProtocolTranscripts(t *testing.T) {
	for _, name := range []string{"lifecycle", "framing", "sigterm", "sigint", "eof", "invocation-id", "validate-config"} {
		path := filepath.Join("..", "..", "testdata", "transcripts", name+".scenario")
		t.Run(strings.TrimSuffix(name, ".scenario"), func(t *testing.T) {
			t.Parallel()
			playTranscript(t, path, scenario.Vars{}, nil)
		})
	}
}
