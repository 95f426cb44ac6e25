package main

import (
	"testing"

	"github.com/paperclipai/daytona-worker/internal/scenario"
)

// TestProtocolTranscripts replays the transcripts that need no Daytona.
func TestProtocolTranscripts(t *testing.T) {
	for _, name := range []string{"lifecycle", "framing", "sigterm", "sigint", "eof", "invocation-id", "validate-config"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			playTranscript(t, transcriptPath(name), scenario.Vars{}, nil)
		})
	}
}
