package sync

import (
	"strconv"
	"strings"
)

// Sandbox paths are handled with the semantics of Node's path.posix, not
// Go's path package: the two differ on trailing slashes ("/a/b/" has the
// dirname "/a" in Node, "/a/b" in Go) and on leading double slashes, and the
// plugin's confinement checks and directory lists depend on them. The
// functions below are ports of Node's algorithms, checked against Node's own
// answers in testdata/node-posix-path.json.

// nodeNormalize is path.posix.normalize: it resolves "." and ".." segments,
// collapses slashes and keeps one trailing slash.
func nodeNormalize(p string) string {
	if p == "" {
		return "."
	}
	absolute := p[0] == '/'
	trailing := p[len(p)-1] == '/'
	p = normalizeSegments(p, !absolute)
	if p == "" {
		if absolute {
			return "/"
		}
		if trailing {
			return "./"
		}
		return "."
	}
	if trailing {
		p += "/"
	}
	if absolute {
		return "/" + p
	}
	return p
}

// normalizeSegments is Node's normalizeString for '/' separators.
func normalizeSegments(p string, allowAboveRoot bool) string {
	var res strings.Builder
	lastSegmentLength, lastSlash, dots := 0, -1, 0
	var code byte
	for i := 0; i <= len(p); i++ {
		switch {
		case i < len(p):
			code = p[i]
		case code == '/':
			return res.String()
		default:
			code = '/'
		}
		if code == '/' {
			switch {
			case lastSlash == i-1 || dots == 1:
				// an empty segment or "."
			case dots == 2:
				cur := res.String()
				if len(cur) < 2 || lastSegmentLength != 2 || cur[len(cur)-1] != '.' || cur[len(cur)-2] != '.' {
					if len(cur) > 2 {
						idx := strings.LastIndexByte(cur, '/')
						res.Reset()
						if idx == -1 {
							lastSegmentLength = 0
						} else {
							res.WriteString(cur[:idx])
							lastSegmentLength = idx - 1 - strings.LastIndexByte(cur[:idx], '/')
						}
						lastSlash, dots = i, 0
						continue
					} else if len(cur) != 0 {
						res.Reset()
						lastSegmentLength = 0
						lastSlash, dots = i, 0
						continue
					}
				}
				if allowAboveRoot {
					if res.Len() > 0 {
						res.WriteString("/..")
					} else {
						res.WriteString("..")
					}
					lastSegmentLength = 2
				}
			default:
				if res.Len() > 0 {
					res.WriteByte('/')
				}
				res.WriteString(p[lastSlash+1 : i])
				lastSegmentLength = i - lastSlash - 1
			}
			lastSlash, dots = i, 0
		} else if code == '.' && dots != -1 {
			dots++
		} else {
			dots = -1
		}
	}
	return res.String()
}

// nodeDirname is path.posix.dirname (trailing slashes are ignored; no
// normalization).
func nodeDirname(p string) string {
	if p == "" {
		return "."
	}
	hasRoot := p[0] == '/'
	end := -1
	matchedSlash := true
	for i := len(p) - 1; i >= 1; i-- {
		if p[i] == '/' {
			if !matchedSlash {
				end = i
				break
			}
		} else {
			matchedSlash = false
		}
	}
	if end == -1 {
		if hasRoot {
			return "/"
		}
		return "."
	}
	if hasRoot && end == 1 {
		return "//"
	}
	return p[:end]
}

// nodeJoin is path.posix.join.
func nodeJoin(parts ...string) string {
	var nonEmpty []string
	for _, p := range parts {
		if p != "" {
			nonEmpty = append(nonEmpty, p)
		}
	}
	if len(nonEmpty) == 0 {
		return "."
	}
	return nodeNormalize(strings.Join(nonEmpty, "/"))
}

func nodeIsAbsolute(p string) bool { return p != "" && p[0] == '/' }

// shellQuote single-quotes s for a POSIX shell, as the plugin does: every
// sandbox path in every command passes through it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// octalMode is the plugin's toOctalModeString: the permission bits in octal,
// at least three digits ("600", "4755").
func octalMode(mode int64) string {
	s := strconv.FormatInt(mode&0o7777, 8)
	for len(s) < 3 {
		s = "0" + s
	}
	return s
}
