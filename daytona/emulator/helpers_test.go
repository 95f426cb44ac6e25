package emulator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// client is a deliberately plain HTTP + WebSocket client: the emulator is
// tested against the wire, not against our daytona client package.
type client struct {
	t    testing.TB
	env  *emulatortest.Env
	http *http.Client
	key  string
	sdk  string // X-Daytona-SDK-Version; "" sends none
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

func (r resp) obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.json(t, &m)
	return m
}

func start(t testing.TB, opts emulator.Options) (*emulatortest.Env, *client) {
	t.Helper()
	env := emulatortest.Start(t, opts)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return env, &client{t: t, env: env, http: &http.Client{Transport: tr}, key: env.APIKey, sdk: "0.218.0"}
}

// envFor wraps a server the test started itself.
func envFor(ts *httptest.Server, srv *emulator.Server) *emulatortest.Env {
	return &emulatortest.Env{Server: srv, HTTP: ts, APIURL: ts.URL + "/api", APIKey: emulator.DevAPIKey}
}

func (c *client) req(ctx context.Context, method, url string, body any, hdr http.Header) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return resp{}, err
		}
		rd = bytes.NewReader(buf)
	}
	r, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return resp{}, err
	}
	if c.key != "" {
		r.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.sdk != "" {
		r.Header.Set("X-Daytona-SDK-Version", c.sdk)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range hdr {
		r.Header[k] = vs
	}
	res, err := c.http.Do(r)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}, err
}

func (c *client) do(method, url string, body any) resp {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.req(ctx, method, url, body, nil)
	require.NoError(c.t, err)
	return r
}

func (c *client) api(method, path string, body any) resp {
	c.t.Helper()
	return c.do(method, c.env.APIURL+path, body)
}

func (c *client) tb(id, method, path string, body any) resp {
	c.t.Helper()
	return c.do(method, c.env.ToolboxURL(id)+path, body)
}

// create makes a sandbox and waits until it is started.
func (c *client) create(body any) map[string]any {
	c.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	r := c.api("POST", "/sandbox", body)
	require.Equal(c.t, http.StatusOK, r.status, "create: %s", r.body)
	sb := r.obj(c.t)
	c.waitState(sb["id"].(string), "started")
	return sb
}

// waitState polls GET /sandbox/{id} until it reports want ("gone" = 404).
func (c *client) waitState(id, want string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := c.api("GET", "/sandbox/"+id, nil)
		if want == "gone" && r.status == http.StatusNotFound {
			return nil
		}
		if r.status == http.StatusOK {
			sb := r.obj(c.t)
			if sb["state"] == want {
				return sb
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("sandbox %s never reached %q; last %d %s", id, want, r.status, r.body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *client) execute(id, command string) (int, string) {
	c.t.Helper()
	r := c.tb(id, "POST", "/process/execute", map[string]any{"command": command})
	require.Equal(c.t, http.StatusOK, r.status, "execute: %s", r.body)
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	r.json(c.t, &out)
	return out.ExitCode, out.Result
}

func (c *client) wsURL(id, path string) string {
	return "ws" + strings.TrimPrefix(c.env.ToolboxURL(id), "http") + path
}

func (c *client) dial(ctx context.Context, url string, subprotocols ...string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.key)
	if c.sdk != "" {
		h.Set("X-Daytona-SDK-Version", c.sdk)
	}
	return websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: c.http, Subprotocols: subprotocols})
}

// demux splits marker-labelled bytes, carrying partial markers across
// frames: the reference behaviour the emulator's frames must reassemble to.
type demuxer struct {
	buf            []byte
	cur            int // 0 none, 1 stdout, 2 stderr
	stdout, stderr bytes.Buffer
}

func (d *demuxer) write(p []byte) {
	d.buf = append(d.buf, p...)
	for {
		i := -1
		for j := 0; j+3 <= len(d.buf); j++ {
			if (d.buf[j] == 1 || d.buf[j] == 2) && d.buf[j+1] == d.buf[j] && d.buf[j+2] == d.buf[j] {
				i = j
				break
			}
		}
		if i < 0 {
			keep := 0
			for keep < 2 && keep < len(d.buf) && (d.buf[len(d.buf)-1-keep] == 1 || d.buf[len(d.buf)-1-keep] == 2) {
				keep++
			}
			d.emit(d.buf[:len(d.buf)-keep])
			d.buf = append([]byte{}, d.buf[len(d.buf)-keep:]...)
			return
		}
		d.emit(d.buf[:i])
		d.cur = int(d.buf[i])
		d.buf = d.buf[i+3:]
	}
}

func (d *demuxer) emit(p []byte) {
	switch d.cur {
	case 1:
		d.stdout.Write(p)
	case 2:
		d.stderr.Write(p)
	}
}

func (d *demuxer) close() { d.emit(d.buf); d.buf = nil }

// processGone reports whether pid no longer runs (a zombie counts as gone:
// in containers, PID 1 may never reap orphans).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

func waitGone(t testing.TB, pid int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("process %d gone", pid), func() bool { return processGone(pid) })
}
