package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/paperclipai/daytona-worker/protocol"
)

// Recorder appends the lines of a live session to a transcript file, with
// secrets redacted, so a real host session can become a regression test.
// Whatever the host sends, the file holds no secret: a line that does not
// parse is not written at all (only its length), secret members are
// redacted, every secret value seen once is redacted wherever it shows up
// again, and URLs lose their user info, query values and fragment.
type Recorder struct {
	mu      sync.Mutex
	f       *os.File
	err     error
	line    bytes.Buffer
	secrets []string // values to redact wherever they appear, longest first
}

// OpenRecorder opens (creating or appending to) a transcript file.
func OpenRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open record file: %w", err)
	}
	return &Recorder{f: f}, nil
}

// minSecretLen keeps a short value (a "1", a "true") from being redacted
// all over the file because it once stood under a secret-looking name.
const minSecretLen = 4

// AddSecret makes the recorder redact s wherever it appears (the worker's
// DAYTONA_API_KEY, say, which the host never sends).
func (r *Recorder) AddSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addSecretLocked(s)
}

func (r *Recorder) addSecretLocked(s string) {
	s = strings.TrimSpace(s)
	if len(s) < minSecretLen || slices.Contains(r.secrets, s) {
		return
	}
	r.secrets = append(r.secrets, s)
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
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
		collectSecrets(v, r.addSecretLocked)
		v = r.scrub(Redact(v))
		redactTerminalPayload(v)
		if !fromHost {
			generalizeParseError(v)
		}
		red, _ := EncodeOrdered(v)
		fmt.Fprintf(&r.line, "%s %s\n", key, red)
	} else {
		// A line that does not parse cannot be redacted member by member,
		// and may hold anything: keep only that it came, and its size.
		// Played back, the placeholder is still a line that does not parse.
		raw, _ := EncodeOrdered(fmt.Sprintf("<redacted: %d bytes that are not JSON>", len(line)))
		fmt.Fprintf(&r.line, "%s %s\n", key+"_raw", raw)
	}
	_, r.err = r.f.Write(r.line.Bytes())
}

// terminalPayloadMember names the member of a terminal message that
// carries what is typed into it or shown by it: the sign-in code the host
// types into a login, the OAuth token `claude setup-token` prints, an
// agent's stdio on a duplex channel. No member name marks a secret there,
// so the payload is never kept (playback matches the placeholder with any
// string).
func terminalPayloadMember(method string) string {
	switch method {
	case protocol.MethodLoginPtyInput, protocol.MethodDuplexChannelWrite:
		return "data"
	case protocol.NotifyLoginPtyOutput, protocol.NotifyDuplexChannelData:
		return "chunk"
	}
	return ""
}

// redactTerminalPayload replaces the payload of a terminal message.
func redactTerminalPayload(v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	method, _ := m["method"].(string)
	member := terminalPayloadMember(method)
	if member == "" {
		return
	}
	if params, ok := m["params"].(map[string]any); ok {
		if s, ok := params[member].(string); ok && s != "" {
			params[member] = redacted
		}
	}
}

// generalizeParseError turns the message of a parse error reply into a
// pattern: it describes the line that did not parse (a character of it, an
// offset), which the recording does not keep, so a replay of the recording
// gets another one.
func generalizeParseError(v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	e, ok := m["error"].(map[string]any)
	if !ok {
		return
	}
	if code, ok := e["code"].(json.Number); ok && code.String() == "-32700" {
		e["message"] = "<re:Parse error: .*>"
	}
}

// collectSecrets calls add with every string under a secret-looking name.
func collectSecrets(v any, add func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && isSecretKey(k) {
				add(s)
			}
			collectSecrets(x, add)
		}
	case []any:
		for _, x := range v {
			collectSecrets(x, add)
		}
	}
}

// scrub redacts, in every string of v (member names included), the secrets
// seen so far and the credentials of URLs.
func (r *Recorder) scrub(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[r.scrubString(k)] = r.scrub(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = r.scrub(x)
		}
		return out
	case string:
		return r.scrubString(v)
	}
	return v
}

func (r *Recorder) scrubString(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	return RedactURLs(s)
}

const redacted = "<redacted>"

// urlPattern finds URLs inside any text: a scheme, "://", and what follows
// up to a space or a quote.
var urlPattern = lazyRegexp(`(?i)\b[a-z][a-z0-9+.\-]*://[^\s"'<>\\]+`)

// RedactURLs replaces, in every URL inside s, the user info, the query's
// values and the fragment with "<redacted>": the places credentials travel
// in (http://user:pass@host, ?token=…, #access_token=…).
func RedactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlPattern().ReplaceAllStringFunc(s, func(raw string) string {
		scheme, rest, _ := strings.Cut(raw, "://")
		authority, tail := rest, ""
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			authority, tail = rest[:i], rest[i:]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			authority = redacted + "@" + authority[at+1:]
		}
		path, query, fragment := tail, "", ""
		hasQuery, hasFragment := false, false
		if i := strings.IndexByte(path, '#'); i >= 0 {
			path, fragment, hasFragment = path[:i], path[i+1:], true
		}
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path, query, hasQuery = path[:i], path[i+1:], true
		}
		var b strings.Builder
		b.WriteString(scheme + "://" + authority + path)
		if hasQuery {
			b.WriteByte('?')
			for i, pair := range strings.Split(query, "&") {
				if i > 0 {
					b.WriteByte('&')
				}
				name, _, hasValue := strings.Cut(pair, "=")
				if hasValue {
					b.WriteString(name + "=" + redacted)
				} else {
					b.WriteString(redacted)
				}
			}
		}
		if hasFragment && fragment != "" {
			b.WriteString("#" + redacted)
		}
		return b.String()
	})
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
var secretKeys = []string{"apikey", "api_key", "token", "password", "passwd", "secret", "private", "authorization", "credential", "cookie"}

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
