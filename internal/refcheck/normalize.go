package refcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Volatile values that differ from run to run and side to side.
var (
	uuidPattern = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	isoPattern  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	// The emulator's SSH and preview tokens: 32 random letters and digits.
	tokenPattern = regexp.MustCompile(`\b[A-Za-z0-9]{32}\b`)
	hex64Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// A template capture without a label names its snapshot
	// paperclip-<environmentId>-<the first 8 hex digits of a random UUID>.
	fallbackTemplatePattern = regexp.MustCompile(`^(paperclip-.*-)[0-9a-f]{8}$`)
	// The emulator keeps a session's files in a folder named after the
	// session and 8 random hex digits, which a shell error names (a `cd`
	// that fails in a session command).
	sessionDirPattern = regexp.MustCompile(`(/daemon/sessions/[^/\s]*-)[0-9a-f]{8}/`)
	// A port in a loopback URL that is neither side's emulator (a closed port the
	// scenario chose) stays; the emulators' are replaced by name first.
)

// durationKeys hold timings, never equal between runs: a command's, and a
// span.record's times (epoch milliseconds).
var durationKeys = map[string]bool{"durationMs": true, "getDurationMs": true, "startTimeMs": true, "endTimeMs": true}

// wallMsSuffix ends the span attributes that hold a step's wall time
// (paperclip.sandbox.startup.transfer.wall_ms, …).
const wallMsSuffix = ".wall_ms"

// derivedKeys hold digests of a side's own ids (a runner ingress's
// generation hashes the sandbox id), which differ whenever the ids do.
var derivedKeys = map[string]bool{"generation": true}

// replacer maps a side's own strings (its emulator URL, root folder, key)
// to the variable names both sides share.
type replacer struct {
	pairs []string // old, new, ... longest first
}

func newReplacer(vars map[string]string) *replacer {
	type kv struct{ k, v string }
	var list []kv
	for name, value := range vars {
		if len(value) < 4 {
			continue // too short to replace safely
		}
		list = append(list, kv{value, "${" + name + "}"})
	}
	sort.Slice(list, func(i, j int) bool {
		if len(list[i].k) != len(list[j].k) {
			return len(list[i].k) > len(list[j].k)
		}
		return list[i].k < list[j].k
	})
	r := &replacer{}
	for _, e := range list {
		r.pairs = append(r.pairs, e.k, e.v)
	}
	return r
}

func (r *replacer) string(s string) string {
	if len(r.pairs) > 0 {
		s = strings.NewReplacer(r.pairs...).Replace(s)
	}
	s = uuidPattern.ReplaceAllString(s, "<uuid>")
	s = isoPattern.ReplaceAllString(s, "<iso8601>")
	s = tokenPattern.ReplaceAllString(s, "<token>")
	s = sessionDirPattern.ReplaceAllString(s, "${1}<hex8>/")
	return s
}

// normalize rewrites one decoded JSON value in place (maps and slices) and
// returns it.
func (r *replacer) normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if durationKeys[k] || strings.HasSuffix(k, wallMsSuffix) {
				if _, isNum := x.(json.Number); isNum {
					v[k] = "<ms>"
					continue
				}
			}
			if str, ok := x.(string); ok && derivedKeys[k] && hex64Pattern.MatchString(str) {
				v[k] = "<hex64>"
				continue
			}
			if str, ok := x.(string); ok && k == "templateRef" && fallbackTemplatePattern.MatchString(str) {
				v[k] = fallbackTemplatePattern.ReplaceAllString(str, "${1}<hex8>")
				continue
			}
			v[k] = r.normalize(x)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = r.normalize(x)
		}
		return v
	case string:
		return r.string(v)
	}
	return v
}

// decodeLine parses one line the worker wrote; a line that is not JSON is
// kept as a string (normalised like one).
func decodeLine(line []byte) any {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return map[string]any{"unparseable line": string(line)}
	}
	return v
}

// joinExecuteLogs merges each run of execute.log notifications of one
// invocation into one notification per stream (stdout first), so that how a
// worker cuts output into chunks does not count, only each stream's text.
func joinExecuteLogs(lines []any) []any {
	var out []any
	for i := 0; i < len(lines); {
		first, _, ok := executeLog(lines[i])
		if !ok {
			out = append(out, lines[i])
			i++
			continue
		}
		inv := first["paperclipInvocationId"]
		var order []string
		texts := map[string]*strings.Builder{}
		j := i
		for ; j < len(lines); j++ {
			m, p, ok := executeLog(lines[j])
			if !ok || fmt.Sprint(m["paperclipInvocationId"]) != fmt.Sprint(inv) {
				break
			}
			stream := fmt.Sprint(p["stream"])
			b, seen := texts[stream]
			if !seen {
				b = &strings.Builder{}
				texts[stream] = b
				order = append(order, stream)
			}
			if s, ok := p["chunk"].(string); ok {
				b.WriteString(s)
			}
		}
		// stdout and stderr arrive on separate streams: their interleaving is
		// not the worker's to keep.
		sort.Strings(order)
		sort.SliceStable(order, func(i, j int) bool { return order[i] == "stdout" && order[j] != "stdout" })
		for _, stream := range order {
			joined := map[string]any{"jsonrpc": "2.0", "method": "execute.log",
				"params": map[string]any{"stream": stream, "chunk": texts[stream].String()}}
			if inv != nil {
				joined["paperclipInvocationId"] = inv
			}
			out = append(out, joined)
		}
		i = j
	}
	return out
}

func executeLog(v any) (msg, params map[string]any, ok bool) {
	m, ok := v.(map[string]any)
	if !ok || m["method"] != "execute.log" {
		return nil, nil, false
	}
	p, ok := m["params"].(map[string]any)
	return m, p, ok
}
