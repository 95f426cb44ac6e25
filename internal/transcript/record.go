package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Recorder appends the lines of a live session to a transcript file, with
// secrets redacted, so a real host session can become a regression test.
type Recorder struct {
	mu   sync.Mutex
	f    *os.File
	err  error
	line bytes.Buffer
}

// OpenRecorder opens (creating or appending to) a transcript file.
func OpenRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open record file: %w", err)
	}
	return &Recorder{f: f}, nil
}

// Record appends one protocol line, sent by the host or by the worker.
// Failures are remembered and reported by Close; recording never disturbs
// the session it records.
func (r *Recorder) Record(fromHost bool, line []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	r.line.Reset()
	key := "worker"
	if fromHost {
		key = "host"
	}
	if v, err := decode(line); err == nil {
		red, _ := EncodeOrdered(Redact(v))
		fmt.Fprintf(&r.line, `{%q:%s}`+"\n", key, red)
	} else {
		raw, _ := json.Marshal(string(line))
		fmt.Fprintf(&r.line, `{%q:%s}`+"\n", key+"_raw", raw)
	}
	_, r.err = r.f.Write(r.line.Bytes())
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cerr := r.f.Close()
	if r.err != nil {
		return r.err
	}
	return cerr
}

// secretKeys are member names whose string values are never written down.
var secretKeys = []string{"apikey", "api_key", "token", "password", "secret", "authorization", "credential"}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Redact replaces secret string values in a decoded JSON value by
// "<redacted>": members whose names look secret, the values of
// {"name":…, "value":…} header pairs (runner ingress secretHeaders), and
// every string of an object its metadata marks sensitive (an interactive
// setup's connectionPayload: the SSH command carries the token) but its type.
func Redact(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		_, hasName := v["name"].(string)
		sensitive := false
		if meta, ok := v["metadata"].(map[string]any); ok {
			sensitive = meta["sensitive"] == true
		}
		for k, x := range v {
			s, isString := x.(string)
			secret := isSecretKey(k) || (hasName && k == "value") || (sensitive && k != "type")
			if isString && secret && s != "" {
				out[k] = "<redacted>"
				continue
			}
			out[k] = Redact(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = Redact(x)
		}
		return out
	}
	return v
}
