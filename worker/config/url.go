package config

import (
	"net/netip"
	"net/url"
	"strings"
	"unicode/utf8"
)

// isURLScheme matches ^[A-Za-z][A-Za-z0-9+.-]*$.
func isURLScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c|0x20 && c|0x20 <= 'z'
		if !letter && (i == 0 || (c < '0' || c > '9') && c != '+' && c != '.' && c != '-') {
			return false
		}
	}
	return s != ""
}

// isValidURL approximates WHATWG `new URL(value)`, the plugin's check: an
// absolute URL with a scheme; for the special schemes (http, https, ws, wss,
// ftp) an authority whose host and port parse as WHATWG parses them (see
// specialAuthorityValid). Other schemes are held to url.Parse.
func isValidURL(s string) bool {
	// WHATWG trims leading and trailing C0 controls and spaces, and removes
	// tabs and newlines anywhere, before parsing.
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || !isURLScheme(scheme) {
		return false
	}
	switch strings.ToLower(scheme) {
	case "http", "https", "ws", "wss", "ftp":
		return specialAuthorityValid(rest)
	}
	_, err := url.Parse(s)
	return err == nil
}

// specialAuthorityValid checks what follows a special scheme's colon: any
// run of slashes or backslashes, then an authority (up to the first of
// `/\?#`) of optional userinfo (up to its last `@`), a host and an optional
// port of digits up to 65535. Paths, queries and fragments never fail.
func specialAuthorityValid(rest string) bool {
	rest = strings.TrimLeft(rest, "/\\")
	if i := strings.IndexAny(rest, "/\\?#"); i >= 0 {
		rest = rest[:i]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	host, port := rest, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return false
		}
		addr, err := netip.ParseAddr(host[1:end])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return false
		}
		host, port = "", host[end+1:]
		if port != "" {
			if port[0] != ':' {
				return false
			}
			port = port[1:]
		}
		return portValid(port)
	}
	if i := strings.IndexByte(host, ':'); i >= 0 {
		host, port = host[:i], host[i+1:]
	}
	return host != "" && portValid(port) && domainValid(host)
}

// portValid: empty, or ASCII digits worth at most 65535 (leading zeros
// allowed).
func portValid(port string) bool {
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' {
			return false
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return false
		}
	}
	return true
}

// domainValid is WHATWG's host parser for a special URL, short of IDNA: the
// host is percent-decoded, must hold no forbidden domain code point, and when
// its last label is a number (decimal, 0x hex or 0-prefixed octal) the whole
// host must parse as an IPv4 address. Labels of non-ASCII or `xn--` are taken
// as they are (their IDNA checks are not repeated here).
func domainValid(host string) bool {
	decoded, err := url.PathUnescape(host)
	if err != nil {
		// WHATWG leaves a `%` that starts no escape as it is, and `%` is a
		// forbidden domain code point.
		return false
	}
	for i := 0; i < len(decoded); i++ {
		switch c := decoded[i]; {
		case c <= ' ', c == 0x7f:
			return false
		case strings.IndexByte("#%/:<>?@[\\]^|", c) >= 0:
			return false
		}
	}
	if decoded == "" || !utf8.ValidString(decoded) {
		// Bytes that decode to no UTF-8 become U+FFFD, which IDNA refuses.
		return false
	}
	if endsInANumber(decoded) {
		return ipv4Valid(decoded)
	}
	return true
}

// endsInANumber is WHATWG's "ends in a number checker".
func endsInANumber(host string) bool {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" {
		if len(parts) == 1 {
			return false
		}
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := ipv4Number(last)
	return ok
}

// ipv4Valid is WHATWG's IPv4 parser, reporting only success: at most four
// numbers, each below 256 but the last, which fills what is left of 32 bits.
func ipv4Valid(host string) bool {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return false
	}
	for i, part := range parts {
		n, ok := ipv4Number(part)
		if !ok {
			return false
		}
		if i < len(parts)-1 && n > 255 {
			return false
		}
		if i == len(parts)-1 && n >= 1<<(8*(5-len(parts))) {
			return false
		}
	}
	return true
}

// ipv4Number is WHATWG's IPv4 number parser: "0x" or "0X" starts hex (an
// empty rest is 0), a leading 0 starts octal, decimal otherwise. Values past
// 2^40 are reported as such (they fail every bound anyway).
func ipv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		switch c := s[i] | 0x20; {
		case '0' <= s[i] && s[i] <= '9':
			d = uint64(s[i] - '0')
		case base == 16 && 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if n = n*base + d; n > 1<<40 {
			n = 1 << 40
		}
	}
	return n, true
}
