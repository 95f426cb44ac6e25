package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
)

// Config defaults, in the units the plugin uses.
const (
	defaultTimeoutMs           = 300_000
	defaultLivenessTimeoutMs   = 30_000
	defaultAutoStopMinutes     = 15
	defaultAutoArchiveMinutes  = 60
	defaultAutoDeleteMinutes   = 7 * 24 * 60
	maxConfigTimeoutMs         = 86_400_000
	archiveOnReleaseAutoDelete = 60
)

// DriverConfig is a parsed environment config, with exactly the keys (and
// JSON key order) of the plugin's normalizedConfig. Absent optional values
// are nil and encode as null.
type DriverConfig struct {
	APIKey              *string  `json:"apiKey"`
	APIURL              *string  `json:"apiUrl"`
	Target              *string  `json:"target"`
	Snapshot            *string  `json:"snapshot"`
	Image               *string  `json:"image"`
	Language            *string  `json:"language"`
	TimeoutMs           float64  `json:"timeoutMs"`
	LivenessTimeoutMs   float64  `json:"livenessTimeoutMs"`
	CPU                 *float64 `json:"cpu"`
	Memory              *float64 `json:"memory"`
	Disk                *float64 `json:"disk"`
	GPU                 *float64 `json:"gpu"`
	AutoStopInterval    float64  `json:"autoStopInterval"`
	AutoArchiveInterval float64  `json:"autoArchiveInterval"`
	AutoDeleteInterval  float64  `json:"autoDeleteInterval"`
	ReuseLease          bool     `json:"reuseLease"`
	ArchiveOnRelease    bool     `json:"archiveOnRelease"`
}

// rawConfig is the host's config object, decoded with JSON numbers kept.
type rawConfig map[string]any

// decodeConfig decodes the config member of a method's params: the host's
// object as sent (metadata and validation read its keys) and the plugin's
// lenient parse of it. Every handler that takes a config decodes it here.
// The plugin reads the config's members without a check: an absent or null
// config makes that read throw (invalid params here), while any other value
// that is not an object (a string, a number, an array) has none of the
// members it reads, so it parses as an empty config.
func decodeConfig(method string, raw json.RawMessage) (rawConfig, DriverConfig, error) {
	rc, err := decodeRawConfig(raw)
	if err != nil {
		return nil, DriverConfig{}, protocol.InvalidParams(method, err)
	}
	return rc, parseDriverConfig(rc), nil
}

var errConfigMissing = errors.New("params.config must be an object")

func decodeRawConfig(raw json.RawMessage) (rawConfig, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, errConfigMissing
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("params.config: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return rawConfig{}, nil
	}
	return m, nil
}

// parseDriverConfig mirrors the plugin's parseDriverConfig exactly: lenient,
// never failing, with JavaScript's coercions. Validation is separate.
func parseDriverConfig(raw rawConfig) DriverConfig {
	str := func(key string) *string {
		if s, ok := optionalString(raw[key]); ok {
			return &s
		}
		return nil
	}
	numberOr := func(key string, fallback float64) float64 {
		v, present := raw[key]
		if !present || v == nil {
			return fallback
		}
		if n := js.Number(v); js.IsFinite(n) {
			return js.Trunc(n)
		}
		return fallback
	}
	optional := func(key string, trunc bool) *float64 {
		v, present := raw[key]
		if !present || v == nil || v == "" {
			return nil
		}
		n := js.Number(v)
		if !js.IsFinite(n) {
			return nil
		}
		if trunc {
			n = js.Trunc(n)
		}
		return &n
	}
	orDefault := func(p *float64, d float64) float64 {
		if p == nil {
			return d
		}
		return *p
	}
	return DriverConfig{
		APIKey:              str("apiKey"),
		APIURL:              str("apiUrl"),
		Target:              str("target"),
		Snapshot:            str("snapshot"),
		Image:               str("image"),
		Language:            str("language"),
		TimeoutMs:           numberOr("timeoutMs", defaultTimeoutMs),
		LivenessTimeoutMs:   numberOr("livenessTimeoutMs", defaultLivenessTimeoutMs),
		CPU:                 optional("cpu", false),
		Memory:              optional("memory", false),
		Disk:                optional("disk", false),
		GPU:                 optional("gpu", false),
		AutoStopInterval:    orDefault(optional("autoStopInterval", true), defaultAutoStopMinutes),
		AutoArchiveInterval: orDefault(optional("autoArchiveInterval", true), defaultAutoArchiveMinutes),
		AutoDeleteInterval:  orDefault(optional("autoDeleteInterval", true), defaultAutoDeleteMinutes),
		ReuseLease:          raw["reuseLease"] == true,
		ArchiveOnRelease:    raw["archiveOnRelease"] == true,
	}
}

func (c DriverConfig) hasResourceRequest() bool {
	return c.CPU != nil || c.Memory != nil || c.Disk != nil || c.GPU != nil
}

const (
	msgResourcesNeedImage        = "Daytona resource settings require image-backed sandbox creation; snapshot/default sandbox creation cannot override CPU, memory, disk, or GPU."
	msgRuntimeResourcesNeedImage = "Daytona resource settings require image-backed sandbox creation; default sandbox creation cannot override CPU, memory, disk, or GPU."
	msgAPIKeyRequired            = "Daytona sandbox environments require an API key in config or DAYTONA_API_KEY."
)

// validate returns the plugin's validation errors, in its order.
func validateDriverConfig(raw rawConfig, c DriverConfig, envAPIKey string) []string {
	var errs []string
	if s, ok := raw["image"].(string); ok && js.Trim(s) == "" {
		errs = append(errs, "Daytona image cannot be empty.")
	}
	if s, ok := raw["snapshot"].(string); ok && js.Trim(s) == "" {
		errs = append(errs, "Daytona snapshot cannot be empty.")
	}
	if c.Image != nil && c.Snapshot != nil {
		errs = append(errs, "Daytona sandbox environments must set either image or snapshot, not both.")
	}
	if c.APIURL != nil && !isValidURL(*c.APIURL) {
		errs = append(errs, "apiUrl must be a valid URL.")
	}
	if c.TimeoutMs < 1 || c.TimeoutMs > maxConfigTimeoutMs {
		errs = append(errs, "timeoutMs must be between 1 and 86400000.")
	}
	if c.LivenessTimeoutMs > maxConfigTimeoutMs {
		errs = append(errs, "livenessTimeoutMs must be less than or equal to 86400000.")
	}
	if c.AutoStopInterval < 0 {
		errs = append(errs, "autoStopInterval must be greater than or equal to 0.")
	}
	if c.AutoArchiveInterval < 0 {
		errs = append(errs, "autoArchiveInterval must be greater than or equal to 0.")
	}
	if c.AutoDeleteInterval < -1 {
		errs = append(errs, "autoDeleteInterval must be greater than or equal to -1.")
	}
	if c.APIKey == nil && js.Trim(envAPIKey) == "" {
		errs = append(errs, msgAPIKeyRequired)
	}
	if c.hasResourceRequest() && c.Image == nil {
		errs = append(errs, msgResourcesNeedImage)
	}
	for _, r := range []struct {
		name  string
		value *float64
	}{{"cpu", c.CPU}, {"memory", c.Memory}, {"disk", c.Disk}, {"gpu", c.GPU}} {
		if r.value != nil && *r.value <= 0 {
			errs = append(errs, r.name+" must be greater than 0 when provided.")
		}
	}
	return errs
}

// runtimeResourceError is the check made before creating a sandbox: a
// snapshot brings its own resources, so they are dropped rather than failing.
func (c DriverConfig) runtimeResourceError() string {
	if !c.hasResourceRequest() || c.Image != nil || c.Snapshot != nil {
		return ""
	}
	return msgRuntimeResourcesNeedImage
}

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

// jsTimeoutSeconds is the plugin's toTimeoutSeconds: whole seconds, at
// least 1, as the JavaScript number it computes (any size).
func jsTimeoutSeconds(ms float64) float64 {
	return math.Max(1, math.Ceil(ms/1000))
}

// maxTimeoutSeconds is the most seconds a time.Duration holds.
const maxTimeoutSeconds = int(math.MaxInt64 / int64(time.Second))

// timeoutSeconds is toTimeoutSeconds as an int for the waits that turn it
// into a Duration, saturating at the largest one rather than overflowing.
func timeoutSeconds(ms float64) int {
	secs := jsTimeoutSeconds(ms)
	if math.IsNaN(secs) || secs >= float64(maxTimeoutSeconds) {
		return maxTimeoutSeconds
	}
	return int(secs)
}
