package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Vars are the values "${NAME}" stands for; captures add to them.
type Vars map[string]json.RawMessage

// StringVar returns a Vars entry for a string value.
func StringVar(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// The patterns compile on first use: the worker links this package for
// --record alone, and every worker start would otherwise pay for compiling
// them.
var (
	varRef      = lazyRegexp(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	wholeVarRef = lazyRegexp(`"\$\{([A-Za-z_][A-Za-z0-9_]*)\}"`)
	uuidRe      = lazyRegexp(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	hex64Re     = lazyRegexp(`^[0-9a-f]{64}$`)
	placeholder = lazyRegexp(`<(any|string|nonempty|number|int|bool|uuid|iso8601|hex64|redacted|re:.+|capture:[A-Za-z_][A-Za-z0-9_]*)>`)
	// inline placeholders usable inside a longer string, and what they match.
	inlinePatterns = map[string]string{
		"any":     `.*`,
		"uuid":    `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
		"number":  `-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?`,
		"int":     `-?[0-9]+`,
		"iso8601": `[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(?:Z|[-+][0-9:]+)`,
		"hex64":   `[0-9a-f]{64}`,
	}
)

// Substitute replaces "${NAME}" references in a JSON text. A reference that
// is a whole JSON string is replaced by the variable's JSON value; one inside
// a longer string by the variable's string content (or JSON text, for a
// value other than a string), escaped for the string.
func Substitute(text []byte, vars Vars) ([]byte, error) {
	var missing []string
	out := wholeVarRef().ReplaceAllFunc(text, func(m []byte) []byte {
		name := string(wholeVarRef().FindSubmatch(m)[1])
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	out = varRef().ReplaceAllFunc(out, func(m []byte) []byte {
		name := string(varRef().FindSubmatch(m)[1])
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		s := string(v) // a value other than a string goes in as its JSON text
		_ = json.Unmarshal(v, &s)
		quoted, _ := json.Marshal(s)
		return quoted[1 : len(quoted)-1]
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("undefined variables: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// SubstituteText replaces "${NAME}" references in plain text (a path).
func SubstituteText(text string, vars Vars) (string, error) {
	sub, err := Substitute(StringVar(text), vars)
	if err != nil {
		return "", err
	}
	var out string
	if err := json.Unmarshal(sub, &out); err != nil {
		return "", fmt.Errorf("%q after substitution: %w", text, err)
	}
	return out, nil
}

func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Match compares an actual message with an expected one (after variable
// substitution) and returns the variables it captured.
func Match(expected, actual []byte, vars Vars) (Vars, error) {
	// Captures may be used later in the same message ("sandboxId":"${LEASE}"
	// after "providerLeaseId":"<capture:LEASE>"): bind them first.
	merged := Vars{}
	for k, v := range vars {
		merged[k] = v
	}
	for k, v := range Capture(expected, actual, vars) {
		merged[k] = v
	}
	exp, err := Substitute(expected, merged)
	if err != nil {
		return nil, err
	}
	e, err := decode(exp)
	if err != nil {
		return nil, fmt.Errorf("expected message is not JSON: %w", err)
	}
	a, err := decode(actual)
	if err != nil {
		return nil, fmt.Errorf("worker wrote a line that is not JSON: %w", err)
	}
	captured := Vars{}
	if err := matchValue("$", e, a, captured); err != nil {
		return nil, err
	}
	return captured, nil
}

func matchValue(path string, e, a any, captured Vars) error {
	if s, ok := e.(string); ok && placeholder().MatchString(s) {
		return matchPlaceholder(path, s, a, captured)
	}
	switch e := e.(type) {
	case map[string]any:
		am, ok := a.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %s", path, describe(a))
		}
		for k := range e {
			if _, ok := am[k]; !ok {
				return fmt.Errorf("%s: missing key %q", path, k)
			}
		}
		keys := make([]string, 0, len(am))
		for k := range am {
			if _, ok := e[k]; !ok {
				return fmt.Errorf("%s: unexpected key %q (value %s)", path, k, describe(am[k]))
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := matchValue(path+"."+k, e[k], am[k], captured); err != nil {
				return err
			}
		}
		return nil
	case []any:
		aa, ok := a.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %s", path, describe(a))
		}
		if len(aa) != len(e) {
			return fmt.Errorf("%s: want %d elements, got %d", path, len(e), len(aa))
		}
		for i := range e {
			if err := matchValue(fmt.Sprintf("%s[%d]", path, i), e[i], aa[i], captured); err != nil {
				return err
			}
		}
		return nil
	case json.Number:
		an, ok := a.(json.Number)
		if !ok || !sameNumber(e, an) {
			return fmt.Errorf("%s: want %s, got %s", path, e, describe(a))
		}
		return nil
	default:
		if !equalScalar(e, a) {
			return fmt.Errorf("%s: want %s, got %s", path, describe(e), describe(a))
		}
		return nil
	}
}

func matchPlaceholder(path, p string, a any, captured Vars) error {
	if whole := placeholder().FindStringSubmatch(p); whole != nil && whole[0] == p {
		kind := whole[1]
		ok := false
		switch {
		case kind == "any":
			ok = true
		case strings.HasPrefix(kind, "capture:"):
			raw, err := json.Marshal(a)
			if err != nil {
				return err
			}
			captured[strings.TrimPrefix(kind, "capture:")] = raw
			ok = true
		case kind == "number":
			_, ok = a.(json.Number)
		case kind == "int":
			n, isNum := a.(json.Number)
			_, err := n.Int64()
			ok = isNum && err == nil
		case kind == "bool":
			_, ok = a.(bool)
		default:
			s, isString := a.(string)
			if isString {
				ok = matchStringKind(kind, s)
			}
		}
		if !ok {
			return fmt.Errorf("%s: want %s, got %s", path, p, describe(a))
		}
		return nil
	}
	// Placeholders inside a longer string: match the string as a pattern.
	s, ok := a.(string)
	if !ok {
		return fmt.Errorf("%s: want a string like %q, got %s", path, p, describe(a))
	}
	if !inlineRegexp(p).MatchString(s) {
		return fmt.Errorf("%s: want %q, got %q", path, p, s)
	}
	return nil
}

func matchStringKind(kind, s string) bool {
	switch {
	case kind == "string", kind == "redacted":
		return true
	case kind == "nonempty":
		return s != ""
	case kind == "uuid":
		return uuidRe().MatchString(s)
	case kind == "hex64":
		return hex64Re().MatchString(s)
	case kind == "iso8601":
		_, err := time.Parse(time.RFC3339Nano, s)
		return err == nil
	case strings.HasPrefix(kind, "re:"):
		re, err := regexp.Compile(`^(?:` + strings.TrimPrefix(kind, "re:") + `)$`)
		return err == nil && re.MatchString(s)
	}
	return false
}

// inlineRegexp turns "paperclip-create-<uuid>" into ^paperclip-create-[0-9a-f-…]$.
func inlineRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	rest := p
	for {
		loc := placeholder().FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		kind := rest[loc[2]:loc[3]]
		if pat, ok := inlinePatterns[kind]; ok {
			b.WriteString("(?:" + pat + ")")
		} else {
			b.WriteString(regexp.QuoteMeta(rest[loc[0]:loc[1]]))
		}
		rest = rest[loc[1]:]
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// sameNumber compares exactly: 1, 1.0 and 1e0 are equal, but two integers
// beyond float64 precision that differ are not.
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	fa, okA := new(big.Float).SetPrec(1024).SetString(string(a))
	fb, okB := new(big.Float).SetPrec(1024).SetString(string(b))
	return okA && okB && fa.Cmp(fb) == 0
}

func equalScalar(e, a any) bool {
	switch e := e.(type) {
	case nil:
		return a == nil
	case string:
		s, ok := a.(string)
		return ok && s == e
	case bool:
		b, ok := a.(bool)
		return ok && b == e
	}
	return false
}

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// Capture binds the "<capture:NAME>" placeholders of expected from actual
// wherever the two line up, even where other parts no longer match. Update
// mode uses it so captures keep working while expectations are rewritten.
func Capture(expected, actual []byte, vars Vars) Vars {
	out := Vars{}
	e, err1 := decode(expected)
	a, err2 := decode(actual)
	if err1 != nil || err2 != nil {
		return out
	}
	var walk func(e, a any)
	walk = func(e, a any) {
		switch e := e.(type) {
		case string:
			if m := placeholder().FindStringSubmatch(e); m != nil && m[0] == e && strings.HasPrefix(m[1], "capture:") {
				if raw, err := json.Marshal(a); err == nil {
					out[strings.TrimPrefix(m[1], "capture:")] = raw
				}
			}
		case map[string]any:
			if am, ok := a.(map[string]any); ok {
				for k, v := range e {
					if av, ok := am[k]; ok {
						walk(v, av)
					}
				}
			}
		case []any:
			if aa, ok := a.([]any); ok {
				for i := range e {
					if i < len(aa) {
						walk(e[i], aa[i])
					}
				}
			}
		}
	}
	walk(e, a)
	return out
}

// lazyRegexp returns expr compiled once, when first asked for.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
