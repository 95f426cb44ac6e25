package refcheck

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Difference is one place where the two sides' outputs of a step differ.
type Difference struct {
	Path      string // "$.result.summary"; "$lines" for a different line count
	Line      int    // which output line (0-based); -1 for $lines
	Reference any    // the reference side's value there (absent: missing)
	Worker    any
}

// missing marks a member one side lacks.
type missingValue struct{}

func (missingValue) MarshalJSON() ([]byte, error) { return []byte(`"<absent>"`), nil }

var missing = missingValue{}

// diffOutputs lists where two steps' normalised outputs differ.
func diffOutputs(ref, ours []any) []Difference {
	var out []Difference
	n := min(len(ref), len(ours))
	for i := 0; i < n; i++ {
		diffValue("$", i, ref[i], ours[i], &out)
	}
	if len(ref) != len(ours) {
		out = append(out, Difference{Path: "$lines", Line: -1, Reference: tail(ref, n), Worker: tail(ours, n)})
	}
	return out
}

func tail(lines []any, from int) any {
	if from >= len(lines) {
		return missing
	}
	return lines[from:]
}

func diffValue(path string, line int, a, b any, out *[]Difference) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			av, aok := am[k]
			bv, bok := bm[k]
			p := path + "." + pathKey(k)
			switch {
			case !aok:
				*out = append(*out, Difference{Path: p, Line: line, Reference: missing, Worker: bv})
			case !bok:
				*out = append(*out, Difference{Path: p, Line: line, Reference: av, Worker: missing})
			default:
				diffValue(p, line, av, bv, out)
			}
		}
		return
	}
	al, aIsList := a.([]any)
	bl, bIsList := b.([]any)
	if aIsList && bIsList && len(al) == len(bl) {
		for i := range al {
			diffValue(path+"["+strconv.Itoa(i)+"]", line, al[i], bl[i], out)
		}
		return
	}
	if !sameValue(a, b) {
		*out = append(*out, Difference{Path: path, Line: line, Reference: a, Worker: b})
	}
}

func pathKey(k string) string {
	for _, r := range k {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return strconv.Quote(k)
		}
	}
	return k
}

// sameValue compares scalars (numbers by value: 1 and 1.0 are the same
// JSON number to the host).
func sameValue(a, b any) bool {
	an, aNum := a.(json.Number)
	bn, bNum := b.(json.Number)
	if aNum && bNum {
		af, errA := an.Float64()
		bf, errB := bn.Float64()
		if errA == nil && errB == nil {
			return af == bf
		}
		return an == bn
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// covers reports whether a declared path covers a difference's path: the
// same path or a member of it.
func covers(declared, path string) bool {
	if declared == "$" || declared == path {
		return true
	}
	return strings.HasPrefix(path, declared+".") || strings.HasPrefix(path, declared+"[")
}

// lookup finds the value at a path such as "$.result.providerLeaseId" or
// "$.result.items[0].id" in one decoded value.
func lookup(v any, path string) (any, error) {
	if !strings.HasPrefix(path, "$") {
		return nil, fmt.Errorf("path %q must start with $", path)
	}
	rest := path[1:]
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			key := rest[:end]
			rest = rest[end:]
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: %q is not in an object", path, key)
			}
			if v, ok = m[key]; !ok {
				return nil, fmt.Errorf("%s: no member %q", path, key)
			}
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("%s: unclosed [", path)
			}
			i, err := strconv.Atoi(rest[1:end])
			rest = rest[end+1:]
			l, ok := v.([]any)
			if err != nil || !ok || i < 0 || i >= len(l) {
				return nil, fmt.Errorf("%s: no element %d", path, i)
			}
			v = l[i]
		default:
			return nil, fmt.Errorf("%s: unexpected %q", path, rest[0])
		}
	}
	return v, nil
}
