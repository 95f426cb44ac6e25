package js

import (
	"strings"
	"time"
)

// ParseDate is V8's Date.parse, as milliseconds since the epoch, for the
// forms a deadline plausibly comes in. The plugin gives a deadline it cannot
// parse no TTL and no expiry, and the host then releases the lease (it fails
// closed), so a form the plugin reads must be read here too:
//   - the ECMAScript date-time format (toISOString's output and its
//     shortenings: 2099, 2099-01, 2099-01-01, 2099-01-01T00:00Z, six-digit
//     signed years, any number of fraction digits, ±HH:mm or ±HHMM), with a
//     day past the month's end rolling over as V8's does (02-30 is 03-02);
//   - V8's lenient variants: a space for the T, a date alone followed by Z,
//     lower-case t and z, and after a space the offsets +HH and " GMT";
//   - toUTCString's and toString's outputs (RFC 1123 with GMT or ±hhmm).
//
// A date alone is UTC; a time without an offset is local time (loc), as in
// JavaScript. Digits alone, such as a number's String() ("43127"), are read
// as V8's legacy parser reads them (parseLegacyNumber). Other legacy forms
// ("Jan 1 2099", "2099/01/01", "1.5") are not read (differences.txt, row
// expiry-legacy-date-forms).
func ParseDate(s string, loc *time.Location) (int64, bool) {
	if ms, ok := parseISODate(s, loc); ok {
		return ms, true
	}
	if ms, ok := parseLegacyNumber(s, loc); ok {
		return ms, true
	}
	for _, layout := range []string{
		"Mon, 02 Jan 2006 15:04:05 GMT", "Mon, 02 Jan 2006 15:04:05 -0700", "02 Jan 2006 15:04:05 GMT",
		"Mon Jan 02 2006 15:04:05 GMT-0700",
	} {
		v := s
		if strings.HasPrefix(layout, "Mon Jan") {
			// toString ends with the zone's name in parentheses.
			if i := strings.Index(v, " ("); i > 0 && strings.HasSuffix(v, ")") {
				v = v[:i]
			}
		}
		if t, err := time.Parse(layout, v); err == nil {
			return t.UnixMilli(), true
		}
	}
	return 0, false
}

// isoScanner reads the fixed-width fields of an ISO date-time.
type isoScanner struct {
	s   string
	pos int
}

func (sc *isoScanner) digits(n int) (int, bool) {
	if sc.pos+n > len(sc.s) {
		return 0, false
	}
	v := 0
	for _, c := range []byte(sc.s[sc.pos : sc.pos+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	sc.pos += n
	return v, true
}

func (sc *isoScanner) accept(chars string) (byte, bool) {
	if sc.pos < len(sc.s) && strings.IndexByte(chars, sc.s[sc.pos]) >= 0 {
		sc.pos++
		return sc.s[sc.pos-1], true
	}
	return 0, false
}

func (sc *isoScanner) done() bool { return sc.pos == len(sc.s) }

func parseISODate(s string, loc *time.Location) (int64, bool) {
	sc := &isoScanner{s: s}
	var year int
	if sign, ok := sc.accept("+-"); ok {
		y, ok := sc.digits(6)
		if !ok || (sign == '-' && y == 0) {
			return 0, false
		}
		year = y
		if sign == '-' {
			year = -y
		}
	} else if y, ok := sc.digits(4); ok {
		year = y
	} else {
		return 0, false
	}
	month, day := 1, 1
	if _, ok := sc.accept("-"); ok {
		m, ok := sc.digits(2)
		if !ok || m < 1 || m > 12 {
			return 0, false
		}
		month = m
		if _, ok := sc.accept("-"); ok {
			d, ok := sc.digits(2)
			if !ok || d < 1 || d > 31 {
				return 0, false
			}
			day = d
		}
	}
	if sc.done() {
		return time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).UnixMilli(), true
	}
	sep, ok := sc.accept("Tt Zz")
	if !ok {
		return 0, false
	}
	if sep == 'Z' || sep == 'z' {
		// A date alone, then Z: UTC, as without it.
		if !sc.done() {
			return 0, false
		}
		return time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).UnixMilli(), true
	}
	if sep == ' ' && sc.done() {
		return time.Date(year, time.Month(month), day, 0, 0, 0, 0, loc).UnixMilli(), true
	}
	hour, ok := sc.digits(2)
	if !ok {
		return 0, false
	}
	if _, ok := sc.accept(":"); !ok {
		return 0, false
	}
	minute, ok := sc.digits(2)
	if !ok || hour > 24 || minute > 59 {
		return 0, false
	}
	second, millis := 0, 0
	if _, ok := sc.accept(":"); ok {
		if second, ok = sc.digits(2); !ok || second > 59 {
			return 0, false
		}
		if _, ok := sc.accept("."); ok {
			n := 0
			for !sc.done() && sc.s[sc.pos] >= '0' && sc.s[sc.pos] <= '9' {
				if n < 3 {
					millis = millis*10 + int(sc.s[sc.pos]-'0')
				}
				n++
				sc.pos++
			}
			if n == 0 {
				return 0, false
			}
			for ; n < 3; n++ {
				millis *= 10
			}
		}
	}
	if hour == 24 && (minute != 0 || second != 0 || millis != 0) {
		return 0, false
	}
	zone := loc
	if !sc.done() {
		if _, ok := sc.accept("Zz"); ok {
			zone = time.UTC
		} else if sep == ' ' && strings.EqualFold(s[sc.pos:], " GMT") {
			sc.pos = len(s)
			zone = time.UTC
		} else if sign, ok := sc.accept("+-"); ok {
			oh, ok := sc.digits(2)
			if !ok || oh > 23 {
				return 0, false
			}
			om := 0
			if _, colon := sc.accept(":"); colon || !sc.done() {
				if om, ok = sc.digits(2); !ok || om > 59 {
					return 0, false
				}
			} else if sep != ' ' {
				// +HH alone is V8's legacy parser's, after a space only.
				return 0, false
			}
			offset := (oh*60 + om) * 60
			if sign == '-' {
				offset = -offset
			}
			zone = time.FixedZone("", offset)
		}
		if !sc.done() {
			return 0, false
		}
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, millis*int(time.Millisecond), zone)
	return t.UnixMilli(), true
}

// parseLegacyNumber is V8's legacy Date.parse of digits alone (not the four
// of an ISO year, read before): 0 is 2000, 1 to 12 a month of 2001, 13 to
// 31 nothing, 32 to 49 the years 2032 to 2049, 50 to 99 the years 1950 to
// 1999, and 100 up to 275760 that year; always January 1st (of the month),
// midnight local time.
func parseLegacyNumber(s string, loc *time.Location) (int64, bool) {
	s = Trim(s)
	if s == "" || len(s) > 6 {
		return 0, false
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	year, month := n, time.January
	switch {
	case n == 0:
		year = 2000
	case n <= 12:
		year, month = 2001, time.Month(n)
	case n <= 31:
		return 0, false
	case n <= 49:
		year = 2000 + n
	case n <= 99:
		year = 1900 + n
	case n > 275760:
		return 0, false
	}
	return time.Date(year, month, 1, 0, 0, 0, 0, loc).UnixMilli(), true
}

// ISOString is Date.prototype.toISOString of t, for years 0 to 9999.
func ISOString(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
