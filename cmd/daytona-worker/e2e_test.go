package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
)

// session is a hand-driven conversation with a running worker.
type session struct {
	t *testing.T
	p *workerhost.Process
}

func newSession(t *testing.T, env []string, args ...string) *session {
	t.Helper()
	return &session{t: t, p: startWorker(t, env, args...)}
}

func (s *session) send(line string) {
	s.t.Helper()
	require.NoError(s.t, s.p.WriteLine([]byte(line)))
}

// recv reads the next message. The bound only stops a hung worker: a 50 MB
// line under -race on a heavily loaded machine can take minutes.
func (s *session) recv() map[string]any {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	line, err := s.p.ReadLine(ctx)
	require.NoError(s.t, err)
	var m map[string]any
	require.NoError(s.t, json.Unmarshal(line, &m), "not JSON: %.300s", line)
	return m
}

func (s *session) initialize() {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"manifest":{},"config":{},"instanceInfo":{"instanceId":"i","hostVersion":"1"},"apiVersion":1}}`)
	assert.Equal(s.t, "log", s.recv()["method"])
	assert.Equal(s.t, true, s.recv()["result"].(map[string]any)["ok"])
}

// shutDown asks the worker to stop, waits for it to exit with code 0 and
// returns what it wrote on stderr.
func (s *session) shutDown() string {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"stop","method":"shutdown"}`)
	s.recv()
	code := waitExit(s.t, s.p)
	require.Equal(s.t, 0, code, "stderr: %s", s.p.Stderr())
	return s.p.Stderr()
}

// A clean shutdown logs no warning: initialize, then shutdown with the input
// closed right behind it, as a pipe from a shell (or a host that ends its
// side) does. The end of input cancels the shutdown's context while Close
// runs, which once read as terminals still closing.
func TestCleanShutdownLogsNoWarning(t *testing.T) {
	t.Parallel()
	for range 3 {
		p := startWorker(t, nil)
		_, err := io.WriteString(p, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"method":"shutdown","params":{}}`+"\n")
		require.NoError(t, err)
		require.NoError(t, p.CloseStdin())
		_, _ = io.Copy(io.Discard, p.Stdout())
		code := waitExit(t, p)
		require.Equal(t, 0, code)
		for _, line := range strings.Split(strings.TrimSpace(p.Stderr()), "\n") {
			assert.NotContains(t, line, `"level":"warn"`)
			assert.NotContains(t, line, `"level":"error"`)
		}
	}
}

func TestFiftyMegabyteLines(t *testing.T) {
	t.Parallel()
	s := newSession(t, nil)
	s.initialize()
	// Lines far longer than any buffer of the worker's: 8 MB in make test,
	// where the race detector slows the worker's reading of them tenfold,
	// and the full 50 MB in make test-long.
	size := 8 << 20
	if testutil.Long() {
		size = 50 << 20
	}
	big := strings.Repeat("a", size)
	go func() {
		// A huge request, a huge malformed line, then a small request.
		_, _ = io.WriteString(s.p, `{"jsonrpc":"2.0","id":1,"method":"health","params":{"padding":"`+big+`"}}`+"\n")
		_, _ = io.WriteString(s.p, `{"jsonrpc":"2.0","id":2,"method":"health","params":{"padding":"`+big+"\n")
		_, _ = io.WriteString(s.p, `{"jsonrpc":"2.0","id":3,"method":"health"}`+"\n")
	}()
	assert.EqualValues(t, 1, s.recv()["id"])
	m := s.recv()
	assert.Nil(t, m["id"])
	assert.EqualValues(t, -32700, m["error"].(map[string]any)["code"])
	assert.EqualValues(t, 3, s.recv()["id"])
}

func TestThousandConcurrentHealthRequests(t *testing.T) {
	t.Parallel()
	s := newSession(t, nil)
	s.initialize()
	const n = 1000
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"health","params":{}}`+"\n", i)
		} else {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":"h-%d","method":"health","params":{}}`+"\n", i)
		}
	}
	go func() { _, _ = io.WriteString(s.p, b.String()) }()
	seen := map[string]bool{}
	inOrder := true
	for i := 0; i < n; i++ {
		m := s.recv()
		require.Equal(t, "ok", m["result"].(map[string]any)["status"])
		var key string
		switch id := m["id"].(type) {
		case float64:
			key = fmt.Sprintf("%d", int(id))
			require.Zero(t, int(id)%2, "a number id must answer a number-id request")
		case string:
			key = strings.TrimPrefix(id, "h-")
		}
		if key != fmt.Sprint(i) {
			inOrder = false
		}
		require.False(t, seen[key], "id %s answered twice", key)
		seen[key] = true
	}
	assert.Len(t, seen, n)
	t.Logf("replies arrived in request order: %v", inOrder)
}

func TestStdoutCarriesOnlyProtocolAndSecretsStayOutOfLogs(t *testing.T) {
	t.Parallel()
	const secret = "dtn_live_0123456789abcdefSECRET"
	s := newSession(t, []string{"DAYTONA_API_KEY=" + secret}, "--log-level", "debug")
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":2,"method":"environmentValidateConfig","params":{"driverKey":"daytona","config":{"apiKey":"` + secret + `"}}}`)
	s.recv()
	s.send(`{"jsonrpc":"2.0","id":3,"method":"health","params":{"apiKey":"` + secret + `"`) // malformed
	s.recv()
	s.send(`{"jsonrpc":"2.0","id":4,"method":"shutdown"}`)
	s.recv()
	waitExit(t, s.p)
	for {
		line, err := s.p.ReadLine(t.Context())
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
		t.Errorf("unexpected stdout line after shutdown: %s", line)
	}
	stderr := s.p.Stderr()
	assert.NotContains(t, stderr, secret)
	assert.NotEmpty(t, stderr, "debug logging writes to stderr")
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		assert.True(t, json.Valid([]byte(line)), "stderr lines are JSON log records: %s", line)
	}
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--version", "--help", "-h"} {
		p := startWorker(t, nil, arg)
		out, err := io.ReadAll(p.Stdout())
		require.NoError(t, err)
		code := waitExit(t, p)
		assert.Equal(t, 0, code, arg)
		if arg == "--version" {
			assert.Regexp(t, `^daytona-worker \S+\n$`, string(out))
		} else {
			assert.Contains(t, string(out), "Usage:")
		}
	}
	p := startWorker(t, nil, "--log-level", "loud")
	code := waitExit(t, p)
	assert.Equal(t, 2, code)
	assert.Contains(t, p.Stderr(), "unknown log level")
}

// TestLogLevelFromTheEnvironment: the host starts the worker without flags,
// so DAYTONA_WORKER_LOG_LEVEL is how a user turns on debug logs; the flag
// wins over it, an empty variable is the default (info), and an unknown
// level stops the worker with a clear error.
func TestLogLevelFromTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		env, args []string
		debug     bool
	}{
		{name: "env debug", env: []string{"DAYTONA_WORKER_LOG_LEVEL=debug"}, debug: true},
		{name: "env in capitals", env: []string{"DAYTONA_WORKER_LOG_LEVEL=DEBUG"}, debug: true},
		{name: "flag over env", env: []string{"DAYTONA_WORKER_LOG_LEVEL=debug"}, args: []string{"--log-level", "info"}},
		{name: "empty env", env: []string{"DAYTONA_WORKER_LOG_LEVEL="}},
		{name: "unset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, tt.env, tt.args...)
			s.initialize()
			stderr := s.shutDown()
			// The worker logs "serving" at debug level when it starts.
			assert.Equal(t, tt.debug, strings.Contains(stderr, `"message":"serving"`), "stderr: %s", stderr)
		})
	}
	p := startWorker(t, []string{"DAYTONA_WORKER_LOG_LEVEL=loud"})
	code := waitExit(t, p)
	assert.Equal(t, 2, code)
	assert.Contains(t, p.Stderr(), `unknown log level "loud"`)
}

// TestMaxMessageCharsMustBeACount: a line limit the worker cannot use stops
// it at start with a clear error, from the flag or from the environment.
func TestMaxMessageCharsMustBeACount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env, args []string
		value     string
	}{
		{args: []string{"--max-message-chars", "0"}, value: "0"},
		{args: []string{"--max-message-chars", "12k"}, value: "12k"},
		{env: []string{"DAYTONA_WORKER_MAX_MESSAGE_CHARS=-5"}, value: "-5"},
		{env: []string{"DAYTONA_WORKER_MAX_MESSAGE_CHARS=lots"}, value: "lots"},
	} {
		p := startWorker(t, tt.env, tt.args...)
		code := waitExit(t, p)
		assert.Equal(t, 2, code, "%v %v", tt.env, tt.args)
		assert.Contains(t, p.Stderr(), `must be a whole number of at least 1, not "`+tt.value+`"`)
	}
}

// TestOneProcessorUnlessGOMAXPROCSIsSet: main puts the worker on one
// processor unless the host's environment sets GOMAXPROCS; an empty variable
// counts as unset, as it does for the runtime.
func TestOneProcessorUnlessGOMAXPROCSIsSet(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  []string
		want float64
	}{
		{name: "unset", want: 1},
		{name: "empty", env: []string{"GOMAXPROCS="}, want: 1},
		{name: "set", env: []string{"GOMAXPROCS=3"}, want: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSession(t, tt.env, "--log-level", "debug")
			s.initialize()
			stderr := s.shutDown()
			var serving map[string]any
			for _, line := range strings.Split(stderr, "\n") {
				if strings.Contains(line, `"message":"serving"`) {
					require.NoError(t, json.Unmarshal([]byte(line), &serving), line)
				}
			}
			require.NotNil(t, serving, "no serving line in stderr: %s", stderr)
			assert.Equal(t, tt.want, serving["gomaxprocs"])
		})
	}
}

func TestCPUProfileIsWrittenOnShutdown(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	s := newSession(t, nil, "--cpuprofile", path)
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":2,"method":"shutdown"}`)
	s.recv()
	waitExit(t, s.p)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(data), 2)
	assert.Equal(t, []byte{0x1f, 0x8b}, data[:2], "a pprof profile is gzip-compressed protobuf")
}

func TestRecordWritesAReplayableTranscript(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "session.scenario")
	s := newSession(t, nil, "--record", path)
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":2,"method":"configChanged","params":{"config":{"apiKey":"dtn_secret_value"}}}`)
	s.recv()
	s.send(`oops`)
	s.recv()
	s.send(`{"jsonrpc":"2.0","id":3,"method":"shutdown"}`)
	s.recv()
	waitExit(t, s.p)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.NotContains(t, string(data), "dtn_secret_value")
	assert.Contains(t, string(data), `"<redacted>"`)
	// A line that does not parse may hold anything: only its size is kept,
	// and the parse error it got becomes a pattern.
	assert.Contains(t, string(data), `host_raw "<redacted: 4 bytes that are not JSON>"`)
	assert.NotContains(t, string(data), "oops")
	assert.Contains(t, string(data), `"message":"<re:Parse error: .*>"`)

	// The recording replays against a fresh worker.
	playTranscript(t, path, scenario.Vars{}, nil)
}
