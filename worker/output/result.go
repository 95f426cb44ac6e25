package output

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
)

// Result is environmentExecute's result (protocol.ExecuteResult on the
// wire), its output written straight from the collected blocks.
type Result struct {
	ExitCode *int
	TimedOut bool
	Stdout   *Buffer // nil: empty
	Stderr   *Buffer
	Metadata map[string]any

	// MaxLineChars is the longest line the host reads, in UTF-16 code
	// units (zero: DefaultMaxMessageChars); an output that would make the
	// result longer is cut (see fitOutputs).
	MaxLineChars int64
	Log          zerolog.Logger // told of a cut
}

// WriteJSON implements rpc.JSONStreamer: {exitCode, timedOut, stdout,
// stderr, metadata}, in the plugin's member order. An output too long for
// the host's line limit is cut to its start and its end: the plugin sends
// such a line whole, the host drops it unread, and the call only ends when
// its timeout does.
func (r *Result) WriteJSON(w io.Writer) error {
	code := "null"
	if r.ExitCode != nil {
		code = strconv.Itoa(*r.ExitCode)
	}
	var meta []byte
	if len(r.Metadata) > 0 { // omitempty, as protocol.ExecuteResult
		var err error
		if meta, err = json.Marshal(r.Metadata); err != nil {
			return err
		}
	}
	head := `{"exitCode":` + code + `,"timedOut":` + strconv.FormatBool(r.TimedOut) + `,"stdout":`
	const (
		stderrKey   = `,"stderr":`
		metadataKey = `,"metadata":`
	)
	limit := r.MaxLineChars
	if limit <= 0 {
		limit = DefaultMaxMessageChars
	}
	// Everything but the two strings, in bytes (never fewer than its units).
	fixed := int64(len(head) + len(stderrKey) + len("}") + envelopeReserve)
	if meta != nil {
		fixed += int64(len(metadataKey) + len(meta))
	}
	stdout, stderr := orEmpty(r.Stdout), orEmpty(r.Stderr)
	outCut, errCut := fitOutputs(stdout, stderr, limit-fixed, limit)
	if !outCut.whole() || !errCut.whole() {
		r.Log.Warn().Int64("stdoutBytes", stdout.Len()).Int64("stderrBytes", stderr.Len()).
			Int64("stdoutOmitted", outCut.tail-outCut.head).Int64("stderrOmitted", errCut.tail-errCut.head).
			Int64("maxMessageChars", limit).Msg("an execute result is cut to the start and the end of its output: the whole would be longer than the host reads in one message")
	}
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	if err := stdout.writeJSONCut(w, outCut); err != nil {
		return err
	}
	if _, err := io.WriteString(w, stderrKey); err != nil {
		return err
	}
	if err := stderr.writeJSONCut(w, errCut); err != nil {
		return err
	}
	if meta != nil {
		if _, err := io.WriteString(w, metadataKey); err != nil {
			return err
		}
		if _, err := w.Write(meta); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "}")
	return err
}

// MarshalJSON lets tests and non-streaming callers encode the result too.
func (r *Result) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	if err := r.WriteJSON(&b); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func orEmpty(b *Buffer) *Buffer {
	if b == nil {
		return &Buffer{}
	}
	return b
}
