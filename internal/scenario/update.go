package scenario

import (
	"encoding/json"
	"sort"
	"strings"
)

var (
	uuidInText = lazyRegexp(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	isoInText  = lazyRegexp(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2})`)
)

// volatileNumbers are keys whose numeric values change from run to run.
var volatileNumbers = map[string]bool{
	"durationMs": true, "getDurationMs": true, "startTimeMs": true, "endTimeMs": true, "elapsedMs": true,
}

// Generalize turns an actual worker message into an expectation for -update:
// where the old expectation had a placeholder that still matches, it is kept;
// variable values become "${NAME}"; uuids, timestamps and durations become
// placeholders, so the rewritten transcript passes on the next run too.
func Generalize(actual, old []byte, vars Vars) ([]byte, error) {
	a, err := decode(actual)
	if err != nil {
		return nil, err
	}
	var o any
	if old != nil {
		if sub, err := Substitute(old, vars); err == nil {
			o, _ = decode(sub)
		}
	}
	return EncodeOrdered(generalize("", a, o, oldText(old), stringVars(vars)))
}

// oldText decodes the old expectation without substitution, so "${NAME}"
// references that still match are kept as written.
func oldText(old []byte) any {
	if old == nil {
		return nil
	}
	v, _ := decode(old)
	return v
}

type namedValue struct{ name, value string }

func stringVars(vars Vars) []namedValue {
	var out []namedValue
	for name, raw := range vars {
		var s string
		if json.Unmarshal(raw, &s) == nil && len(s) >= 4 {
			out = append(out, namedValue{name, s})
		}
	}
	// Longest first, so a value containing another is replaced whole.
	sort.Slice(out, func(i, j int) bool {
		if len(out[i].value) != len(out[j].value) {
			return len(out[i].value) > len(out[j].value)
		}
		return out[i].name < out[j].name
	})
	return out
}

func generalize(key string, a, old, oldRaw any, vars []namedValue) any {
	if os, ok := oldRaw.(string); ok {
		if (placeholder().MatchString(os) || varRef().MatchString(os)) && matchValue("$", old, a, Vars{}) == nil {
			return os
		}
	}
	switch a := a.(type) {
	case map[string]any:
		om, _ := old.(map[string]any)
		rm, _ := oldRaw.(map[string]any)
		out := make(map[string]any, len(a))
		for k, v := range a {
			out[k] = generalize(k, v, om[k], rm[k], vars)
		}
		return out
	case []any:
		oa, _ := old.([]any)
		ra, _ := oldRaw.([]any)
		out := make([]any, len(a))
		for i, v := range a {
			var o, r any
			if i < len(oa) {
				o = oa[i]
			}
			if i < len(ra) {
				r = ra[i]
			}
			out[i] = generalize(key, v, o, r, vars)
		}
		return out
	case json.Number:
		if volatileNumbers[key] {
			return "<number>"
		}
		return a
	case string:
		return generalizeString(a, vars)
	}
	return a
}

func generalizeString(s string, vars []namedValue) string {
	for _, v := range vars {
		if s == v.value {
			return "${" + v.name + "}"
		}
	}
	if uuidRe().MatchString(s) {
		return "<uuid>"
	}
	if isoInText().FindString(s) == s && s != "" {
		return "<iso8601>"
	}
	for _, v := range vars {
		s = strings.ReplaceAll(s, v.value, "${"+v.name+"}")
	}
	s = uuidInText().ReplaceAllString(s, "<uuid>")
	return isoInText().ReplaceAllString(s, "<iso8601>")
}
