package sync

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// excluder decides which members a host-side tar leaves out, as GNU tar's
// --exclude does with its defaults for exclusion: wildcards, a '*' that
// matches '/', no anchoring (a pattern may match the whole name or any part
// after a '/'), and a match on a directory covering everything under it.
type excluder struct{ patterns []string }

func newExcluder(patterns []string) excluder {
	return excluder{patterns: append([]string{"._*"}, patterns...)}
}

// excluded reports whether the member name (such as "./dir/file") is left out.
func (e excluder) excluded(name string) bool {
	for _, p := range e.patterns {
		if excludeMatch(p, name) {
			return true
		}
	}
	return false
}

// excludeMatch is gnulib's exclude_fnmatch without EXCLUDE_ANCHORED: the
// pattern is tried against name and against every suffix that follows a
// '/' (not itself followed by '/').
func excludeMatch(pattern, name string) bool {
	if fnmatchLeadingDir(pattern, name) {
		return true
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' && (i+1 >= len(name) || name[i+1] != '/') {
			if fnmatchLeadingDir(pattern, name[i+1:]) {
				return true
			}
		}
	}
	return false
}

// fnmatchLeadingDir is fnmatch(pattern, s, FNM_LEADING_DIR): the pattern
// matches s, or a prefix of s that is followed by '/'.
func fnmatchLeadingDir(pattern, s string) bool {
	if fnmatch(pattern, s) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' && fnmatch(pattern, s[:i]) {
			return true
		}
	}
	return false
}

// fnmatch matches s against a shell wildcard pattern without FNM_PATHNAME
// or FNM_PERIOD: '*' and '?' match any character, '/' and leading dots
// included; "[...]" is a bracket expression ('!' or '^' negates, ranges,
// [:class:]); '\' quotes the next character.
func fnmatch(pattern, s string) bool {
	// Iterative matching with one backtrack point for the last '*'.
	px, sx := 0, 0
	starPx, starSx := -1, -1
	for sx < len(s) || px < len(pattern) {
		if px < len(pattern) {
			switch pattern[px] {
			case '*':
				for px < len(pattern) && pattern[px] == '*' {
					px++
				}
				starPx, starSx = px, sx
				continue
			case '?':
				if sx < len(s) {
					_, w := utf8.DecodeRuneInString(s[sx:])
					px++
					sx += w
					continue
				}
			case '[':
				if sx < len(s) {
					r, w := utf8.DecodeRuneInString(s[sx:])
					if matched, next, ok := matchBracket(pattern, px, r); ok {
						if matched {
							px = next
							sx += w
							continue
						}
					} else if s[sx] == '[' { // not a valid bracket: a literal '['
						px++
						sx++
						continue
					}
				}
			default:
				pc, pw := utf8.DecodeRuneInString(pattern[px:])
				if pc == '\\' && px+1 < len(pattern) {
					pc, pw = utf8.DecodeRuneInString(pattern[px+1:])
					pw++
				}
				if sx < len(s) {
					sc, sw := utf8.DecodeRuneInString(s[sx:])
					if sc == pc {
						px += pw
						sx += sw
						continue
					}
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			_, w := utf8.DecodeRuneInString(s[starSx:])
			starSx += w
			px, sx = starPx, starSx
			continue
		}
		return false
	}
	return true
}

// matchBracket matches r against the bracket expression at pattern[start]
// ('['). ok is false when the expression is not closed.
func matchBracket(pattern string, start int, r rune) (matched bool, next int, ok bool) {
	i := start + 1
	negate := false
	if i < len(pattern) && (pattern[i] == '!' || pattern[i] == '^') {
		negate = true
		i++
	}
	first := true
	for i < len(pattern) {
		if pattern[i] == ']' && !first {
			return matched != negate, i + 1, true
		}
		first = false
		if strings.HasPrefix(pattern[i:], "[:") {
			if end := strings.Index(pattern[i+2:], ":]"); end >= 0 {
				if inClass(pattern[i+2:i+2+end], r) {
					matched = true
				}
				i += 2 + end + 2
				continue
			}
		}
		lo, w := utf8.DecodeRuneInString(pattern[i:])
		if lo == '\\' && i+1 < len(pattern) {
			lo, w = utf8.DecodeRuneInString(pattern[i+1:])
			w++
		}
		i += w
		hi := lo
		if i+1 < len(pattern) && pattern[i] == '-' && pattern[i+1] != ']' {
			h, hw := utf8.DecodeRuneInString(pattern[i+1:])
			if h == '\\' && i+2 < len(pattern) {
				h, hw = utf8.DecodeRuneInString(pattern[i+2:])
				hw++
			}
			hi = h
			i += 1 + hw
		}
		if lo <= r && r <= hi {
			matched = true
		}
	}
	return false, 0, false
}

func inClass(class string, r rune) bool {
	switch class {
	case "alpha":
		return unicode.IsLetter(r)
	case "digit":
		return r >= '0' && r <= '9'
	case "alnum":
		return unicode.IsLetter(r) || unicode.IsDigit(r)
	case "upper":
		return unicode.IsUpper(r)
	case "lower":
		return unicode.IsLower(r)
	case "space":
		return unicode.IsSpace(r)
	case "blank":
		return r == ' ' || r == '\t'
	case "punct":
		return r < 0x80 && unicode.IsPunct(r) || r < 0x80 && unicode.IsSymbol(r)
	case "xdigit":
		return strings.ContainsRune("0123456789abcdefABCDEF", r)
	case "cntrl":
		return unicode.IsControl(r)
	case "print":
		return unicode.IsPrint(r)
	case "graph":
		return unicode.IsGraphic(r) && r != ' '
	}
	return false
}
