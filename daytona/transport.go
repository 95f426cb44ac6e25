package daytona

import (
	"net/http"
)

// DefaultMaxRequestsPerHost is how many requests the clients sharing a
// RequestQueue have in flight to one Daytona host when the queue is built
// with a bound of zero. It is also how many idle connections the default
// HTTP client keeps per host, so that a full set of requests finds its
// connections open.
const DefaultMaxRequestsPerHost = 32

// NewHTTPClient returns the HTTP client New uses when Config.HTTPClient is
// nil: a clone of http.DefaultTransport that keeps DefaultMaxRequestsPerHost
// idle connections per host (the transport's default of two would close,
// and later re-dial with a TLS handshake, every connection beyond the second
// when many commands run at once).
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = DefaultMaxRequestsPerHost
	return withoutRedirects(&http.Client{Transport: t})
}
