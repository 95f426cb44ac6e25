package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paperclipai/daytona-worker/internal/transcript"
)

// TestProtocolTranscripts replays the transcripts that need no Daytona.
func TestProtocolTranscripts(t *testing.T) {
	for _, name := range []string{"lifecycle", "framing", "sigterm", "eof", "validate-config"} {
		path := filepath.Join("..", "..", "testdata", "transcripts", name+".jsonl")
		t.Run(strings.TrimSuffix(name, ".jsonl"), func(t *testing.T) {
			t.Parallel()
			playTranscript(t, path, transcript.Vars{}, nil)
		})
	}
}
