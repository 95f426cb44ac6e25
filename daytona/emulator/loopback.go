package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Loopback is an emulator served over HTTP on a loopback port, for the
// tools that run one in their own process (playback, refcheck,
// bench-compare); tests use emulatortest.
type Loopback struct {
	*Server
	URL    string // http://127.0.0.1:PORT
	APIURL string // URL + "/api", the control plane's base

	http *http.Server
}

// ServeLoopback starts an emulator with opts (in a temporary root it removes
// on Close when opts.Root is empty) on a free loopback port.
func ServeLoopback(opts Options) (*Loopback, error) {
	srv, err := New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("emulator: listen: %w", err), srv.Close())
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	return &Loopback{Server: srv, URL: url, APIURL: url + "/api", http: hs}, nil
}

// Close ends the emulator (its sandbox processes and WebSockets, then its
// root if it made one) and then the HTTP server.
func (l *Loopback) Close() error {
	err := l.Server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(err, l.http.Shutdown(ctx))
}
