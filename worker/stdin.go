package worker

import (
	"encoding/json"
	"errors"

	"github.com/paperclipai/daytona-worker/internal/js"
)

// maxArrayLikeStdin bounds the bytes an array-like stdin ({"length": n})
// may ask for: the plugin would allocate whatever length a request names,
// and a one-line request must not make the worker allocate gigabytes.
const maxArrayLikeStdin = 64 << 20

var errArrayLikeStdinTooLong = errors.New("params.stdin is an array-like object longer than 64 MiB")

// stdinBytes is the plugin's Buffer.from(params.stdin, "utf8") for a stdin
// that is not a string, when Buffer.from takes it (js.BufferFrom). ok is
// false for every other value, which Buffer.from refuses with a TypeError
// (differences.txt, row wrong-param-types).
func stdinBytes(raw json.RawMessage) (b []byte, ok bool, err error) {
	switch jsonKindOf(raw) {
	case "array", "object":
	default:
		return nil, false, nil
	}
	v, decoded := js.Decode(raw)
	if !decoded {
		return nil, false, nil
	}
	b, ok, err = js.BufferFrom(v, maxArrayLikeStdin)
	if errors.Is(err, js.ErrTooLong) {
		err = errArrayLikeStdinTooLong
	}
	return b, ok, err
}
