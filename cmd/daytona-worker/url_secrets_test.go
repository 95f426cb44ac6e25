package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestURLSecretsStayOutOfErrorsAndLogs: an apiUrl may carry a key as user
// info, a token in its query or something private in its fragment. Whatever
// way a request fails, neither the host (stdout) nor the debug log (stderr)
// may see any of them.
func TestURLSecretsStayOutOfErrorsAndLogs(t *testing.T) {
	t.Parallel()
	const (
		user     = "userSECRETinfo"
		password = "passSECRETword"
		query    = "querySECRETvalue"
		fragment = "fragSECRETment"
	)
	closed := closedAddr(t)
	hangUp := hangUpAddr(t)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	plain := strings.TrimPrefix(failing.URL, "http://")

	for _, tt := range []struct{ name, scheme, userinfo, addr string }{
		{"closed port", "http", user, closed},
		{"closed port, user and password", "http", user + ":" + password, closed},
		{"connection hung up", "http", user, hangUp},
		{"server error", "http", user, plain},
		{"TLS to a plain server", "https", user, plain},
		{"unsupported scheme", "ftp", user, plain},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			apiURL := tt.scheme + "://" + tt.userinfo + "@" + tt.addr + "/api?token=" + query + "&q=" + query + "#" + fragment
			cfg, err := json.Marshal(map[string]any{"apiKey": "k", "apiUrl": apiURL, "timeoutMs": 1000})
			require.NoError(t, err)
			s := newSession(t, nil, "--log-level", "debug")
			s.initialize()
			var stdout strings.Builder
			for i, method := range []string{"environmentAcquireLease", "environmentResumeLease", "environmentProbe"} {
				s.send(`{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"` + method + `","params":{"driverKey":"daytona","companyId":"c","environmentId":"e","runId":"r","providerLeaseId":"sb-1","config":` + string(cfg) + `}}`)
				for {
					m := s.recv()
					line, _ := json.Marshal(m)
					stdout.Write(line)
					stdout.WriteByte('\n')
					if m["id"] != nil {
						break
					}
				}
			}
			stderr := s.shutDown()
			if tt.scheme != "ftp" {
				assert.Contains(t, stderr, "daytona request failed", "the debug log reports the failed request")
			}
			for _, secret := range []string{user, password, query, fragment} {
				assert.NotContains(t, stdout.String(), secret, "stdout")
				assert.NotContains(t, stderr, secret, "stderr")
			}
			if t.Failed() {
				t.Logf("stdout:\n%s", stdout.String())
			}
		})
	}
}

// closedAddr is a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// hangUpAddr is a local address that accepts connections and closes them
// before any answer.
func hangUpAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}
