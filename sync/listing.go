package sync

import (
	"archive/tar"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	stdsync "sync"
	"time"
	"unicode/utf8"

	"github.com/paperclipai/daytona-worker/internal/js"
)

// The plugin validates a sandbox-authored archive by reading `tar -tvf`
// line by line before extracting it. We read the archive ourselves, but
// render each header as the line GNU tar would print and hold it to the same
// rules, so every archive the plugin refuses is refused here with the same
// message. The parser also accepts bsdtar's dialect, as the plugin's does.

// Short names for JavaScript's \s, \S and "." in the plugin's patterns.
const (
	jsSpace    = js.SpaceClass
	jsNonSpace = js.NonSpaceClass
	jsLine     = js.LineClass
)

var (
	// <perms> <owner>/<group> <size> <date> <time> <rest> (GNU tar, busybox)
	gnuListingRE = lazyRegexp(`^(` + jsNonSpace + `+)` + jsSpace + `+` + jsNonSpace + `+/` + jsNonSpace + `+` +
		jsSpace + `+[0-9]+` + jsSpace + `+` + jsNonSpace + `+` + jsSpace + `+` + jsNonSpace + `+` + jsSpace + `+(` + jsLine + `*)$`)
	// <perms> <links> <user> <group> <size> <Mon> <day> <time|year> <rest> (bsdtar)
	bsdListingRE = lazyRegexp(`^(` + jsNonSpace + `+)` + jsSpace + `+[0-9]+` + jsSpace + `+` + jsNonSpace + `+` + jsSpace + `+` +
		jsNonSpace + `+` + jsSpace + `+[0-9]+` + jsSpace + `+` + jsNonSpace + `+` + jsSpace + `+[0-9]{1,2}` + jsSpace +
		`+(?:[0-9]{4}|[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?)` + jsSpace + `+(` + jsLine + `*)$`)
)

// lazyRegexp returns expr compiled once, when first asked for: compiling at
// start-up would add to every worker's cold start, and most never sync.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return stdsync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// listingLine is one parsed `tar -tvf` line.
type listingLine struct {
	typeFlag string // the first character of the mode string
	rest     string // the name field, with " -> target" or " link to target"
}

// parseListingLine is the plugin's parseTarVerboseListingLine. The GNU shape
// is tried first; the slash it requires between owner and group keeps a
// bsdtar line with numeric ids from matching it shifted. It reports false
// for anything else (device nodes included), so callers fail closed.
func parseListingLine(line string) (listingLine, bool) {
	for _, re := range []*regexp.Regexp{gnuListingRE(), bsdListingRE()} {
		if m := re.FindStringSubmatch(line); m != nil {
			r, _ := utf8.DecodeRuneInString(m[1])
			return listingLine{typeFlag: string(r), rest: m[2]}, true
		}
	}
	return listingLine{}, false
}

// splitLinkOnce is the plugin's splitLinkEntryOnce: it splits a link field
// at its only delimiter, and fails when there is none or more than one (a
// name holding the delimiter would otherwise hide the real target).
func splitLinkOnce(field, delimiter string) (name, target string, ok bool) {
	first := strings.Index(field, delimiter)
	if first < 0 || strings.Contains(field[first+len(delimiter):], delimiter) {
		return "", "", false
	}
	return field[:first], field[first+len(delimiter):], true
}

// UnsafeArchiveError is an archive refused before anything was extracted.
// Its messages are the plugin's "Daytona syncOut refusing …", which the
// host classifies as restore_unsafe_archive.
type UnsafeArchiveError struct{ msg string }

func (e *UnsafeArchiveError) Error() string { return e.msg }

func unsafeArchive(format string, args ...any) error {
	return &UnsafeArchiveError{msg: fmt.Sprintf(format, args...)}
}

// posixPathEscapes: the normalized path is "..", starts with "../" or is
// absolute.
func posixPathEscapes(p string) bool {
	n := nodeNormalize(p)
	return n == ".." || strings.HasPrefix(n, "../") || nodeIsAbsolute(n)
}

// checkListingLine is the plugin's per-line rule; empty lines pass.
func checkListingLine(line string) error {
	if js.Trim(line) == "" {
		return nil
	}
	parsed, ok := parseListingLine(line)
	if !ok {
		return unsafeArchive("Daytona syncOut refusing tarball with an unparseable entry listing: %s", line)
	}
	name := parsed.rest
	var target string
	isLink := false
	switch parsed.typeFlag {
	case "l":
		n, t, ok := splitLinkOnce(name, " -> ")
		if !ok {
			return unsafeArchive("Daytona syncOut refusing unparseable or ambiguous symlink entry: %s", line)
		}
		name, target, isLink = n, t, true
	case "h":
		n, t, ok := splitLinkOnce(name, " link to ")
		if !ok {
			return unsafeArchive("Daytona syncOut refusing unparseable or ambiguous hardlink entry: %s", line)
		}
		name, target, isLink = n, t, true
	}
	clean := strings.TrimRight(name, "/")
	if clean != "" && posixPathEscapes(clean) {
		return unsafeArchive("Daytona syncOut refusing tarball member that escapes the extraction dir: %s", name)
	}
	if isLink && (nodeIsAbsolute(target) || posixPathEscapes(nodeJoin(nodeDirname(clean), target))) {
		return unsafeArchive("Daytona syncOut refusing tarball link whose target escapes the extraction dir: %s -> %s", name, target)
	}
	return nil
}

// listingColumns is GNU tar's column state over one `tar -tvf` listing:
// the "owner/group size" field is right-aligned to a width that starts at 19
// and grows with the longest one seen so far, the time stamp left-aligned to
// one that starts at 16, so a line's spacing depends on the lines before it
// (and the plugin quotes whole lines in its refusals). Times are in the
// local zone, as tar prints them for the plugin (it inherits TZ).
type listingColumns struct {
	ugsWidth  int
	dateWidth int
	loc       *time.Location // nil: time.Local
}

func newListingColumns() *listingColumns {
	return &listingColumns{ugsWidth: 19, dateWidth: len("YYYY-MM-DD HH:MM")}
}

// line renders the next header as `tar -tvf` (GNU tar 1.34, C locale,
// default escape quoting) prints it.
func (c *listingColumns) line(h *tar.Header) string {
	owner := h.Uname
	if owner == "" {
		owner = strconv.Itoa(h.Uid)
	}
	group := h.Gname
	if group == "" {
		group = strconv.Itoa(h.Gid)
	}
	var size string
	switch h.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		size = strconv.FormatInt(h.Devmajor, 10) + "," + strconv.FormatInt(h.Devminor, 10)
	case tar.TypeSymlink, tar.TypeLink, tar.TypeDir:
		size = "0"
	default:
		size = strconv.FormatInt(h.Size, 10)
	}
	loc := c.loc
	if loc == nil {
		loc = time.Local
	}
	stamp := h.ModTime.In(loc).Format("2006-01-02 15:04")
	if len(stamp) > c.dateWidth {
		c.dateWidth = len(stamp)
	}
	pad := len(owner) + 1 + len(group) + 1 + len(size)
	if pad > c.ugsWidth {
		c.ugsWidth = pad
	}
	var b strings.Builder
	b.WriteString(modeString(h))
	b.WriteByte(' ')
	b.WriteString(owner + "/" + group)
	b.WriteByte(' ')
	b.WriteString(strings.Repeat(" ", c.ugsWidth-pad))
	b.WriteString(size)
	b.WriteByte(' ')
	b.WriteString(stamp)
	b.WriteString(strings.Repeat(" ", c.dateWidth-len(stamp)))
	b.WriteByte(' ')
	b.WriteString(escapeName(h.Name))
	switch h.Typeflag {
	case tar.TypeSymlink:
		b.WriteString(" -> " + escapeName(h.Linkname))
	case tar.TypeLink:
		b.WriteString(" link to " + escapeName(h.Linkname))
	}
	return b.String()
}

// modeString is GNU tar's ten-character mode column.
func modeString(h *tar.Header) string {
	var t byte
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeCont: // tar.Reader never yields the legacy NUL type
		t = '-'
	case tar.TypeDir:
		t = 'd'
	case tar.TypeSymlink:
		t = 'l'
	case tar.TypeLink:
		t = 'h'
	case tar.TypeChar:
		t = 'c'
	case tar.TypeBlock:
		t = 'b'
	case tar.TypeFifo:
		t = 'p'
	default:
		t = '?'
	}
	m := h.Mode
	out := []byte{t, '-', '-', '-', '-', '-', '-', '-', '-', '-'}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<(8-i)) != 0 {
			out[1+i] = rwx[i]
		}
	}
	special := func(pos int, bit int64, set, unset byte) {
		if m&bit != 0 {
			if out[pos] == 'x' {
				out[pos] = set
			} else {
				out[pos] = unset
			}
		}
	}
	special(3, 0o4000, 's', 'S')
	special(6, 0o2000, 's', 'S')
	special(9, 0o1000, 't', 'T')
	return string(out)
}

// escapeName quotes a name as GNU tar's "escape" style does in the C locale:
// backslash and control characters as C escapes, other bytes outside
// printable ASCII as three-digit octal.
func escapeName(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\a':
			b.WriteString(`\a`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\v':
			b.WriteString(`\v`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
