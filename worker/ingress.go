package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

// Runner ingress: runners inside a sandbox call back to the host over an
// authenticated WebSocket through Daytona's private preview proxy.
const (
	runnerIngressPort     = 43127
	msgIngressPort        = "Daytona runner ingress must use fixed port 43127."
	msgIngressPath        = "Daytona runner ingress path is invalid."
	msgIngressNeedsLease  = "Daytona runner ingress requires a provider lease id."
	msgPreviewIncomplete  = "Daytona returned an incomplete private preview endpoint."
	msgPreviewInvalidURL  = "Daytona returned an invalid private preview URL."
	maxIngressGenerations = 4096
)

var runnerIngressPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^/api/runner/v1/connect/[^/?#]+$`)
})

// runnerIngressEndpoint is the plugin's onEnvironmentRunnerIngressEndpoint:
// the sandbox's preview link for port 43127 as a wss:// URL ending in the
// requested path, the preview token as the secret header, and a generation
// that changes only when the sandbox's lifecycle revision does (a stop and
// start), not when Daytona rotates the preview credentials.
func (w *Worker) runnerIngressEndpoint(ctx context.Context, raw json.RawMessage) (any, error) {
	var p protocol.RunnerIngressEndpointParams
	var idValue any
	var noLease error // params.lease absent or null: the plugin's read of its id throws
	if err := decodeDriverParams(protocol.MethodEnvironmentRunnerIngressEndpoint, raw, &p, ingressParams(&idValue, &noLease)); err != nil {
		return nil, err
	}
	if port, ok := rawJSONNumber(p.Port); !ok || port != runnerIngressPort {
		return nil, errors.New(msgIngressPort)
	}
	// The plugin tests and appends `${params.path}`: an array reads as its
	// entries joined with commas.
	path := js.StringJSON(p.Path)
	if !runnerIngressPath().MatchString(path) {
		return nil, errors.New(msgIngressPath)
	}
	if noLease != nil {
		return nil, noLease
	}
	if p.Lease == nil || p.Lease.ProviderLeaseID == nil || *p.Lease.ProviderLeaseID == "" {
		return nil, errors.New(msgIngressNeedsLease)
	}
	_, cfg, err := config.Decode(protocol.MethodEnvironmentRunnerIngressEndpoint, p.Config)
	if err != nil {
		return nil, err
	}
	sc, err := w.scopeFor(p.DriverBaseParams, *p.Lease.ProviderLeaseID, cfg)
	if err != nil {
		return nil, err
	}
	sc = sc.withIDValue(idValue)
	return w.leases.withActivity(ctx, sc, false, func() (any, error) {
		s, _, err := w.getSandbox(ctx, sc)
		if err != nil {
			return nil, err
		}
		// The live state decides both whether the sandbox must be started
		// (the cached handle may say started of one auto-stopped since) and
		// the generation, which follows the provider's lifecycle revision.
		if err := s.refresh(ctx); err != nil {
			return nil, err
		}
		if err := s.ensureStarted(ctx, timeoutSeconds(cfg.TimeoutMs)); err != nil {
			return nil, err
		}
		link, err := s.client.PreviewLink(ctx, s.id(), runnerIngressPort)
		if err != nil {
			return nil, err
		}
		if link.URL == "" || link.Token == "" {
			return nil, errors.New(msgPreviewIncomplete)
		}
		wsURL, err := previewWebsocketURL(link.URL, path)
		if err != nil {
			return nil, err
		}
		return protocol.RunnerIngressEndpoint{
			Kind:          protocol.RunnerIngressKindAuthenticatedWebsocket,
			WebsocketURL:  wsURL,
			SecretHeaders: []protocol.SecretHeader{{Name: protocol.PreviewTokenHeader, Value: link.Token}},
			Generation:    w.ingress.generation(s.snapshot(), w.newID),
		}, nil
	})
}

// ingressParams reads the ingress params as the plugin does: the base
// members are only cache keys; of the lease only providerLeaseId is read,
// through `params.lease.providerLeaseId`, so a lease that is not an object
// has none, and an absent or null one is the plugin's TypeError, kept in
// *noLease for after the port and path checks that come first there.
// *idValue is the id as sent when it is not a string (leaseIDMember).
func ingressParams(idValue *any, noLease *error) func(obj map[string]json.RawMessage) error {
	return func(obj map[string]json.RawMessage) error {
		keyOnlyBase(obj)
		*noLease = requireObject(protocol.MethodEnvironmentRunnerIngressEndpoint, obj, "lease")
		onlyKind(obj, "lease", "object")
		nested(obj, "lease", func(lease map[string]json.RawMessage) {
			*idValue = leaseIDMember(lease, "providerLeaseId")
			delete(lease, "metadata")
			delete(lease, "expiresAt")
		})
		return nil
	}
}

// previewWebsocketURL turns a private preview link into the runner's
// WebSocket URL the way the plugin does with WHATWG URL: only a plain https
// URL (no credentials, query or fragment) is accepted; the scheme becomes
// wss, one trailing slash of its path is dropped and path appended, and the
// result is serialised as WHATWG does (lower-case host, default port left
// out, the pathname setter's dot-segment removal and percent-encoding).
func previewWebsocketURL(link, path string) (string, error) {
	invalid := errors.New(msgPreviewInvalidURL)
	s := removeTabNewline(strings.TrimFunc(link, func(r rune) bool { return r <= ' ' }))
	if strings.Contains(s, `\`) {
		return "", invalid // WHATWG reads it as a slash; Daytona never sends one
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Opaque != "" || u.Host == "" {
		return "", invalid
	}
	if u.User != nil {
		if pw, _ := u.User.Password(); u.User.Username() != "" || pw != "" {
			return "", invalid
		}
	}
	emptyHash := strings.Contains(s, "#")
	if u.RawQuery != "" || u.Fragment != "" {
		return "", invalid
	}
	host := u.Hostname()
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return "", invalid // IDNA is not needed for Daytona's hosts
		}
	}
	host = strings.ToLower(host)
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n > 65535 {
			return "", invalid
		}
		if n != 443 {
			host += ":" + strconv.Itoa(n)
		}
	}
	base := whatwgPath(u.EscapedPath())
	base = strings.TrimSuffix(base, "/")
	var b strings.Builder
	b.WriteString("wss://")
	b.WriteString(host)
	b.WriteString(whatwgPath(base + path))
	if u.ForceQuery {
		b.WriteByte('?')
	}
	if emptyHash {
		b.WriteByte('#')
	}
	return b.String(), nil
}

func removeTabNewline(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
}

// whatwgPath is what WHATWG URL's pathname setter makes of input for a
// special scheme: segments split on / and \, "." and ".." (also written
// %2e) resolved, and the path percent-encode set escaped.
func whatwgPath(input string) string {
	input = removeTabNewline(input)
	var segments []string
	i := 0
	if i < len(input) && (input[0] == '/' || input[0] == '\\') {
		i = 1
	}
	var buf strings.Builder
	for ; ; i++ {
		atEnd := i >= len(input)
		if !atEnd && input[i] != '/' && input[i] != '\\' {
			c := input[i]
			if inPathEncodeSet(c) {
				const hexDigits = "0123456789ABCDEF"
				buf.WriteByte('%')
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xf])
			} else {
				buf.WriteByte(c)
			}
			continue
		}
		seg := buf.String()
		buf.Reset()
		switch {
		case isDoubleDotSegment(seg):
			if len(segments) > 0 {
				segments = segments[:len(segments)-1]
			}
			if atEnd {
				segments = append(segments, "")
			}
		case isSingleDotSegment(seg):
			if atEnd {
				segments = append(segments, "")
			}
		default:
			segments = append(segments, seg)
		}
		if atEnd {
			break
		}
	}
	return "/" + strings.Join(segments, "/")
}

func inPathEncodeSet(c byte) bool {
	switch c {
	case ' ', '"', '#', '<', '>', '?', '`', '{', '}':
		return true
	}
	return c < 0x20 || c >= 0x7f
}

func isSingleDotSegment(s string) bool { return s == "." || strings.EqualFold(s, "%2e") }

func isDoubleDotSegment(s string) bool {
	switch strings.ToLower(s) {
	case "..", ".%2e", "%2e.", "%2e%2e":
		return true
	}
	return false
}

// ingressGenerations is the plugin's runnerIngressGenerationStore: per
// sandbox, the generation of its current lifecycle revision (updatedAt,
// else createdAt). A sandbox with no revision keeps one random generation.
// Generations of a known revision are a pure function of it, so dropping
// entries when the table is full loses nothing but those random ones.
type ingressGenerations struct {
	mu      sync.Mutex
	entries map[string]ingressGeneration
}

type ingressGeneration struct {
	revision   string
	generation string
}

func (g *ingressGenerations) generation(sbx *daytona.Sandbox, newID func() string) string {
	revision := sbx.UpdatedAt
	if revision == "" {
		revision = sbx.CreatedAt
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur, ok := g.entries[sbx.ID]; ok && cur.revision == revision {
		return cur.generation
	}
	seed := revision
	if seed == "" {
		seed = newID()
	}
	sum := sha256.Sum256([]byte(sbx.ID + "\x00" + seed))
	gen := hex.EncodeToString(sum[:])
	if g.entries == nil || len(g.entries) >= maxIngressGenerations {
		g.entries = map[string]ingressGeneration{}
	}
	g.entries[sbx.ID] = ingressGeneration{revision: revision, generation: gen}
	return gen
}

// reset forgets every generation (at shutdown, as the plugin does).
func (g *ingressGenerations) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entries = nil
}
