package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/paperclipai/daytona-worker/internal/utf8text"
)

const (
	// DefaultAPIURL is the Daytona Cloud control plane.
	DefaultAPIURL = "https://app.daytona.io/api"
	// DefaultSource is sent as X-Daytona-Source when Config.Source is empty.
	DefaultSource = "daytona-worker"
	// DefaultSDKVersion is sent as X-Daytona-SDK-Version when Config.SDKVersion
	// is empty. Daemons answer SDK versions >= 0.167.0 with session logs split
	// into stdout/stderr JSON and WebSocket frames that keep the stream markers.
	DefaultSDKVersion = "0.218.0"
	// maxJSONBody bounds a decoded success body; sandbox lists are the largest.
	maxJSONBody = 64 << 20
)

// Config configures a Client. Only APIKey is required.
type Config struct {
	// APIKey is sent as "Authorization: Bearer <APIKey>". It never appears in
	// errors.
	APIKey string
	// APIURL is the control plane base, DefaultAPIURL when empty.
	APIURL string
	// Target is the region sent on every create ("us", "eu"), unless the
	// create parameters name one; empty lets the organization default apply.
	Target string
	// OrganizationID is sent as X-Daytona-Organization-ID; only needed when
	// APIKey is a JWT.
	OrganizationID string
	// HTTPClient performs every request, WebSocket handshakes included;
	// NewHTTPClient() when nil. Leave its Timeout at zero: deadlines come
	// from each call's context, and a client-wide timeout would cut long
	// executions and transfers.
	HTTPClient *http.Client
	// Source is sent as X-Daytona-Source (telemetry label).
	Source string
	// SDKVersion is sent as X-Daytona-SDK-Version; it must be >= 0.167.0 for
	// the log formats this package parses.
	SDKVersion string
	// UserAgent defaults to "<Source>/<SDKVersion>".
	UserAgent string
	// Retry governs retries of idempotent reads; zero fields take the values
	// of DefaultRetryPolicy().
	Retry RetryPolicy
	// Clock drives waits and retry back-off; the real clock when nil.
	Clock Clock
	// Rand returns a float in [0,1) for back-off jitter; math/rand/v2 when nil.
	Rand func() float64
	// Queue bounds and orders the requests in flight to each host (see
	// RequestQueue). Clients that talk to the same hosts through one
	// HTTPClient should share one; nil gives the client a queue of its own
	// with DefaultMaxRequestsPerHost.
	Queue *RequestQueue
	// Log receives a debug line for every failed request (method, path,
	// status, code): errors themselves carry only the API's message, as the
	// SDK does. The zero Logger discards.
	Log zerolog.Logger
}

// Clock abstracts time so that waits and retries can be tested without
// sleeping.
type Clock interface {
	Now() time.Time
	// Sleep pauses for d or until ctx is done, then returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Client talks to the Daytona control plane and, through Toolbox handles, to
// the toolbox API of each sandbox. It is safe for concurrent use and holds no
// per-call state.
type Client struct {
	apiKey  string
	apiURL  *url.URL
	target  string
	http    *http.Client
	header  http.Header
	retry   RetryPolicy
	clock   Clock
	randf   func() float64
	version string
	streams *streamDialer // nil: log streams are not prepared
	queue   *RequestQueue
	log     zerolog.Logger
	// waitRefreshBound is the const of that name; tests shorten it.
	waitRefreshBound time.Duration
	// copyBuffers lends log streams the buffer a message is copied through.
	copyBuffers sync.Pool
}

// APIURL is the Daytona API the client calls.
func (c *Client) APIURL() string { return c.apiURL.String() }

// Target is the region the client creates sandboxes in ("" for Daytona's
// default).
func (c *Client) Target() string { return c.target }

// New builds a Client from cfg.
func New(cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.APIKey) == "" {
		return nil, errors.New("daytona: Config.APIKey is required")
	}

	raw := cfg.APIURL
	if raw == "" {
		raw = DefaultAPIURL
	}
	u, err := parseHTTPURL(raw, "Config.APIURL")
	if err != nil {
		return nil, err
	}
	c := &Client{
		apiKey: cfg.APIKey,
		apiURL: u,
		target: cfg.Target,
		http:   cfg.HTTPClient,
		retry:  cfg.Retry.withDefaults(),
		clock:  cfg.Clock,
		randf:  cfg.Rand,
		queue:  cfg.Queue,
		log:    cfg.Log,

		waitRefreshBound: waitRefreshBound,
	}
	if c.queue == nil {
		c.queue = NewRequestQueue(0)
	}
	c.copyBuffers.New = func() any { return new([copyBufferSize]byte) }
	if c.http == nil {
		c.http = NewHTTPClient()
	}
	c.http = withoutRedirects(c.http)
	c.streams = newStreamDialer(c.http)
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.randf == nil {
		c.randf = rand.Float64
	}
	source := cfg.Source
	if source == "" {
		source = DefaultSource
	}
	c.version = cfg.SDKVersion
	if c.version == "" {
		c.version = DefaultSDKVersion
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = source + "/" + c.version
	}
	c.header = http.Header{}
	c.header.Set("Authorization", headerValue("Bearer "+cfg.APIKey))
	c.header.Set("X-Daytona-Source", source)
	c.header.Set("X-Daytona-SDK-Version", c.version)
	c.header.Set("User-Agent", ua)
	if cfg.OrganizationID != "" {
		c.header.Set("X-Daytona-Organization-ID", cfg.OrganizationID)
	}
	return c, nil
}

// headerValue is a header value as the SDK's HTTP library (axios) sends it:
// characters a header cannot carry (control characters, anything past
// U+00FF) are dropped, U+0080..U+00FF travel as single bytes, and spaces and
// tabs at either end are trimmed. A key with a line break inside thus
// reaches Daytona without it, instead of failing before anything is sent.
func headerValue(v string) string {
	b := make([]byte, 0, len(v))
	for _, r := range v {
		if r == '\t' || r >= 0x20 && r <= 0x7e || r >= 0x80 && r <= 0xff {
			b = append(b, byte(r))
		}
	}
	return strings.Trim(string(b), " \t")
}

func (c *Client) now() time.Time {
	if c == nil || c.clock == nil {
		return time.Now()
	}
	return c.clock.Now()
}

// withoutRedirects returns hc (or a copy sharing its transport) that never
// follows a redirect: a 3xx from Daytona is answered as the error it is.
// Following it would send the bearer key wherever it points.
func withoutRedirects(hc *http.Client) *http.Client {
	cp := *hc
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// checkSegment refuses an ID or name that cannot be one path segment: an
// empty one, and "." or "..", which every URL resolver (Node's and the
// server's) collapses into another endpoint. Nothing is sent for it; every
// other character is escaped by joinURL.
func checkSegment(op, s string) error {
	switch s {
	case "":
		return &InvalidArgumentError{Message: "daytona: " + op + ": empty sandbox ID or name"}
	case ".", "..":
		return &InvalidArgumentError{Message: fmt.Sprintf("daytona: %s: %q is no sandbox ID or name (it would name another endpoint)", op, s)}
	}
	return nil
}

// apiEndpoint joins the control-plane base with path segments, escaping each.
func (c *Client) apiEndpoint(segments ...string) *url.URL {
	return joinURL(c.apiURL, segments...)
}

func joinURL(base *url.URL, segments ...string) *url.URL {
	u := *base
	u.RawQuery = ""
	u.Fragment = ""
	raw := strings.TrimRight(base.EscapedPath(), "/")
	for _, s := range segments {
		raw += "/" + url.PathEscape(s)
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		p = raw
	}
	u.Path = p
	u.RawPath = raw
	return &u
}

// request describes one HTTP exchange. Bodies are either bytes (replayable,
// so a retry can resend them) or a one-shot stream.
type request struct {
	method      string
	url         *url.URL
	body        []byte
	stream      io.Reader
	contentType string
	// download marks a response streamed to the caller for as long as the
	// transfer takes.
	download bool
	// untilDone marks a request answered only when the command it runs ends
	// (a synchronous execute), however long that takes.
	untilDone bool
}

// long reports whether the exchange may last as long as a file takes to
// stream or a command to run; it then takes no slot of the request queue
// (see RequestQueue), where it would hold up every short request to the
// host (all sandboxes' toolboxes share one proxy host) until it ended.
func (r *request) long() bool { return r.stream != nil || r.download || r.untilDone }

func newJSONRequest(method string, u *url.URL, in any) (*request, error) {
	r := &request{method: method, url: u}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("daytona: encode %s %s body: %w", method, u.EscapedPath(), err)
		}
		r.body = b
		r.contentType = "application/json"
	}
	return r, nil
}

// idempotent requests may be retried after a response or a mid-flight
// failure. Mutations never are: the server may already have acted.
func (r *request) idempotent() bool {
	return r.method == http.MethodGet || r.method == http.MethodHead
}

func (c *Client) build(ctx context.Context, r *request) (*http.Request, error) {
	var body io.Reader
	switch {
	case r.stream != nil:
		body = r.stream
	case r.body != nil:
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, r.url.String(), body)
	if err != nil {
		// A parse error quotes the URL, credentials and all: keep its reason only.
		return nil, fmt.Errorf("daytona: build %s %s: %w", r.method, sanitizeURL(r.url), unwrapURLError(err))
	}
	for k, v := range c.header {
		req.Header[k] = slices.Clone(v)
	}
	req.Header.Set("Accept", "application/json")
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	return req, nil
}

// send performs r with the retry policy and returns a 2xx response whose body
// the caller must close. Any other status becomes an *APIError; transport
// failures become a *TransportError.
func (c *Client) send(ctx context.Context, r *request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		req, err := c.build(ctx, r)
		if err != nil {
			return nil, err
		}
		sent := time.Now()
		release := func() {}
		if !r.long() {
			if release, err = c.queue.acquire(ctx, hostKey(r.url)); err != nil {
				return nil, c.transportError(ctx, r, err)
			}
		}
		resp, err := c.http.Do(req)
		if err != nil {
			release()
			terr := c.transportError(ctx, r, err)
			if d, ok := ctx.Deadline(); ok {
				terr.Deadline = d.Sub(sent)
			}
			c.log.Debug().Str("method", r.method).Str("url", sanitizeURL(r.url)).Int("attempt", attempt).
				AnErr("cause", terr.Err).Msg("daytona request failed")
			if ctx.Err() != nil || !c.retryableTransport(r, err) {
				return nil, terr
			}
			if !c.backoff(ctx, attempt, 0) {
				return nil, terr
			}
			continue
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
			return resp, nil
		}
		apiErr := c.newAPIError(r.method, r.url, resp)
		drainClose(resp.Body)
		release()
		c.log.Debug().Str("method", r.method).Str("url", apiErr.URL).Int("status", apiErr.StatusCode).
			Str("code", apiErr.Code).Int("attempt", attempt).Str("message", apiErr.Message).Msg("daytona request failed")
		if !r.idempotent() || r.stream != nil || !retryableStatus(resp.StatusCode) {
			return nil, apiErr
		}
		if !c.backoff(ctx, attempt, apiErr.RetryAfter) {
			return nil, apiErr
		}
	}
}

func (c *Client) transportError(ctx context.Context, r *request, err error) *TransportError {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	// When the context ended, its error says more than the transport's.
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return &TransportError{Method: r.method, URL: sanitizeURL(r.url), Err: err}
}

// retryableTransport: reads retry any connection failure; mutations
// retry when the request provably never left (the dial failed), and a PUT
// or a DELETE also when its connection was reset or closed before any
// answer, as the SDK's connection retry replays those idempotent methods
// (a kept-alive connection the server closed as the request went out
// fails so, and Go's transport replays only reads).
func (c *Client) retryableTransport(r *request, err error) bool {
	if r.stream != nil {
		return false
	}
	if r.idempotent() {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return (r.method == http.MethodPut || r.method == http.MethodDelete) && droppedMidFlight(err)
}

// droppedMidFlight reports a connection that the peer reset or closed
// before it answered: Node's ECONNRESET ("socket hang up" included) and
// EPIPE.
func droppedMidFlight(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do sends r and decodes a JSON success body into out (when out is non-nil
// and the body is not empty).
func (c *Client) do(ctx context.Context, r *request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer drainClose(resp.Body)
	if out == nil {
		return nil
	}
	return c.decode(r, resp, out)
}

func (c *Client) decode(r *request, resp *http.Response, out any) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody))
	if err != nil {
		return c.bodyError(resp.Request.Context(), r, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	// The SDK decodes the body as UTF-8 text before parsing it, so raw
	// ill-formed bytes in a string (a daemon's command output) become one
	// U+FFFD per maximal subpart; encoding/json alone would put one per byte.
	if err := json.Unmarshal(utf8text.Replace(data), out); err != nil {
		return fmt.Errorf("daytona: %s %s: decode response: %w", r.method, r.url.EscapedPath(), err)
	}
	return nil
}

// releasingBody gives the request's queue slot back when the body is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// hostKey names the host a request goes to, for the request queue.
func hostKey(u *url.URL) string { return u.Scheme + "://" + u.Host }

// drainClose reads a little of what is left so the connection can be reused,
// then closes the body.
func drainClose(rc io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, rc, 4<<10)
	_ = rc.Close()
}

// getJSON sends a GET and decodes the JSON answer into out.
func (c *Client) getJSON(ctx context.Context, u *url.URL, out any) error {
	return c.do(ctx, &request{method: http.MethodGet, url: u}, out)
}

// sendJSON sends in as the JSON body of a method request (POST, PUT ...)
// and decodes the JSON answer into out.
func (c *Client) sendJSON(ctx context.Context, method string, u *url.URL, in, out any) error {
	r, err := newJSONRequest(method, u, in)
	if err != nil {
		return err
	}
	return c.do(ctx, r, out)
}

// sendJSONUntilDone is sendJSON for a request answered only when the
// command it runs ends: it takes no slot of the request queue.
func (c *Client) sendJSONUntilDone(ctx context.Context, method string, u *url.URL, in, out any) error {
	r, err := newJSONRequest(method, u, in)
	if err != nil {
		return err
	}
	r.untilDone = true
	return c.do(ctx, r, out)
}

// parseHTTPURL parses an http(s) base URL. Its errors never quote the URL
// as given: it may carry credentials (user info, a token in the query).
// Another scheme is a *SchemeError.
func parseHTTPURL(raw, what string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	switch {
	case err != nil:
		return nil, fmt.Errorf("daytona: %s is not a valid URL", what)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, &SchemeError{Scheme: u.Scheme}
	case u.Host == "":
		return nil, fmt.Errorf("daytona: %s %s has no host", what, sanitizeURL(u))
	}
	return u, nil
}
