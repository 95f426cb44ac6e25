package workerhost

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/internal/jsonstream"
	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// The test binary, started with fakeWorkerEnv set, is the worker these
// tests drive.
const fakeWorkerEnv = "WORKERHOST_FAKE_WORKER=1"

// coverDirVar is where a cover build writes its data (go test -cover).
const coverDirVar = "GOCOVERDIR="

func TestMain(m *testing.M) {
	if os.Getenv("WORKERHOST_FAKE_WORKER") == "1" {
		os.Exit(fakeWorker(os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// fakeWorker answers one request per line:
//
//	echo      result: the params
//	notify    {"n": N}: N execute.log notifications, then the result N
//	ask       a span.record request of its own; the result is the host's answer
//	hold      no reply until the next request has had its own
//	stray     a reply to an id never sent, then the result true
//	env       result: its environment
//	stderr    {"text": s}: s on stderr, then the result true
//	partial   half a line, then exit
//	exit      {"code": c}: exit with c, without a reply
//
// It exits 0 at the end of its input.
func fakeWorker(stdin io.Reader, stdout, stderr io.Writer) int {
	in := bufio.NewScanner(stdin)
	in.Buffer(nil, 4<<20)
	out := json.NewEncoder(stdout)
	var held []any
	for in.Scan() {
		var req struct {
			ID     any            `json:"id"`
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		reply := func(result any) { _ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}) }
		switch req.Method {
		case "echo":
			reply(req.Params)
		case "notify":
			n := int(req.Params["n"].(float64))
			for i := range n {
				_ = out.Encode(map[string]any{"jsonrpc": "2.0", "method": "execute.log", "paperclipInvocationId": "inv-1",
					"params": map[string]any{"stream": "stdout", "chunk": fmt.Sprintf("chunk %d\n", i)}})
			}
			reply(n)
		case "ask":
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": "w-1", "method": "span.record", "params": map[string]any{}})
			if !in.Scan() {
				return 3
			}
			var answer any
			_ = json.Unmarshal(in.Bytes(), &answer)
			reply(answer)
		case "hold":
			held = append(held, req.ID)
			continue
		case "stray":
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": "nobody", "result": 1})
			reply(true)
		case "env":
			reply(os.Environ())
		case "stderr":
			fmt.Fprint(stderr, req.Params["text"])
			reply(true)
		case "partial":
			fmt.Fprint(stdout, `{"jsonrpc":`)
			return 0
		case "exit":
			return int(req.Params["code"].(float64))
		}
		for _, id := range held {
			_ = out.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": "held"})
		}
		held = nil
	}
	return 0
}

func startFake(t *testing.T) *Process {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	p, err := Start(t.Context(), Command{Path: exe, Env: fakeEnv(t, "EXTRA=1")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// fakeEnv is the fake worker's environment, with extra.
func fakeEnv(t *testing.T, extra ...string) []string {
	env := append([]string{fakeWorkerEnv}, extra...)
	if testing.CoverMode() != "" {
		// A cover build run as the fake warns on stderr without a folder.
		env = append(env, coverDirVar+t.TempDir())
	}
	return env
}

func TestRawLinesComeInOrderAndEndWithEOF(t *testing.T) {
	p := startFake(t)
	ctx := t.Context()
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}`,
		`{"jsonrpc":"2.0","id":"two","method":"notify","params":{"n":2}}`,
	}
	_, err := p.Write([]byte(lines[0] + "\n" + lines[1] + "\n"))
	require.NoError(t, err)
	var got []string
	for range 4 {
		line, err := p.ReadLine(ctx)
		require.NoError(t, err)
		got = append(got, string(line))
	}
	assert.Equal(t, []string{
		`{"id":1,"jsonrpc":"2.0","result":{"a":1}}`,
		`{"jsonrpc":"2.0","method":"execute.log","paperclipInvocationId":"inv-1","params":{"chunk":"chunk 0\n","stream":"stdout"}}`,
		`{"jsonrpc":"2.0","method":"execute.log","paperclipInvocationId":"inv-1","params":{"chunk":"chunk 1\n","stream":"stdout"}}`,
		`{"id":"two","jsonrpc":"2.0","result":2}`,
	}, got)
	require.NoError(t, p.CloseStdin())
	_, err = p.ReadLine(ctx)
	assert.ErrorIs(t, err, io.EOF)
	code, err := p.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
}

func TestReadLineReportsAPartialLastLine(t *testing.T) {
	p := startFake(t)
	require.NoError(t, p.WriteLine([]byte(`{"id":1,"method":"partial"}`)))
	line, err := p.ReadLine(t.Context())
	assert.ErrorIs(t, err, ErrPartialLine)
	assert.Equal(t, `{"jsonrpc":`, string(line))
	_, err = p.ReadLine(t.Context())
	assert.ErrorIs(t, err, io.EOF)
}

func TestConnReportsAPartialLastLine(t *testing.T) {
	p := startFake(t)
	c := NewConn(p, p.Stdout(), Options{})
	_, err := c.Call(t.Context(), Request{Method: "partial"})
	assert.ErrorIs(t, err, ErrNoReply)
	assert.ErrorIs(t, c.Err(), ErrPartialLine)
}

func TestReadLineStopsAtTheContext(t *testing.T) {
	p := startFake(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := p.ReadLine(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestExitCodesSignalsAndStderr(t *testing.T) {
	tests := []struct {
		name   string
		act    func(p *Process) error
		code   int
		stderr string
	}{
		{"exit code", func(p *Process) error {
			return p.WriteLine([]byte(`{"id":1,"method":"stderr","params":{"text":"said\n"}}` + "\n" + `{"id":2,"method":"exit","params":{"code":7}}`))
		}, 7, "said\n"},
		{"end of input", func(p *Process) error { return p.CloseStdin() }, 0, ""},
		{"signal", func(p *Process) error { return p.Signal(syscall.SIGKILL) }, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startFake(t)
			require.NoError(t, tt.act(p))
			code, err := p.Wait(t.Context())
			require.NoError(t, err)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.stderr, p.Stderr())
		})
	}
}

// A live copy of stderr sees each line before the worker has exited.
func TestStderrIsCopiedAsItIsWritten(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	live := &syncBuffer{}
	p, err := Start(t.Context(), Command{Path: exe, Env: fakeEnv(t), Stderr: live})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	c := NewConn(p, p.Stdout(), Options{})
	_, err = c.Call(t.Context(), Request{Method: "stderr", Params: map[string]any{"text": "early\n"}})
	require.NoError(t, err)
	// The reply follows the write; the copy to live may trail it a little.
	testutil.WaitFor(t, "the live copy", func() bool { return live.String() == "early\n" })
	require.NoError(t, p.CloseStdin())
	_, err = p.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "early\n", p.Stderr())
}

func TestTheWorkerGetsAMinimalEnvironment(t *testing.T) {
	p := startFake(t)
	c := NewConn(p, p.Stdout(), Options{})
	r, err := c.Call(t.Context(), Request{Method: "env"})
	require.NoError(t, err)
	got := slices.DeleteFunc(r.Result.([]any), func(v any) bool {
		s, _ := v.(string)
		return strings.HasPrefix(s, coverDirVar)
	})
	assert.ElementsMatch(t, []any{"PATH=" + os.Getenv("PATH"), "TZ=UTC", fakeWorkerEnv, "EXTRA=1"}, got)
}

func TestMemoryIsReported(t *testing.T) {
	p := startFake(t)
	peak, rss, err := p.Memory()
	require.NoError(t, err)
	assert.Positive(t, rss)
	assert.GreaterOrEqual(t, peak, rss)
}

func TestConnRoutesRepliesByIDAndNotificationsInOrder(t *testing.T) {
	p := startFake(t)
	var events []string
	c := NewConn(p, p.Stdout(), Options{
		NewID: func(n int64) any { return fmt.Sprintf("r-%d", n) },
		Notify: func(m Message) {
			// Raw chunks are valid during the callback only.
			events = append(events, m.Method()+" "+m.Invocation()+" "+string(m.Params()["chunk"].(jsonstream.Bytes)))
		},
		Raw: func(path []string) bool { return len(path) == 2 && path[1] == "chunk" },
	})
	onReply := func(r Reply) { events = append(events, fmt.Sprint("reply ", r.Result)) }
	calls, err := c.Send(
		Request{Method: "hold", OnReply: onReply},
		Request{Method: "notify", Params: map[string]any{"n": 2}, OnReply: onReply},
		Request{Method: "echo", ID: 5, Params: json.RawMessage(`{"raw":true}`), Members: map[string]any{"paperclipInvocation": map[string]any{"id": "inv-1"}}},
	)
	require.NoError(t, err)
	var results []any
	for _, call := range calls {
		r, err := call.Wait(t.Context())
		require.NoError(t, err)
		results = append(results, r.Result)
	}
	assert.Equal(t, []any{"held", json.Number("2"), map[string]any{"raw": true}}, results)
	assert.Equal(t, []any{"r-1", "r-2", 5}, []any{calls[0].ID, calls[1].ID, calls[2].ID})
	// Callbacks ran on the reading goroutine, in the worker's order, before
	// the waiters got their replies.
	assert.Equal(t, []string{"execute.log inv-1 chunk 0\n", "execute.log inv-1 chunk 1\n", "reply 2", "reply held"}, events)
	assert.Empty(t, c.Pending())
}

func TestConnAnswersTheWorkersRequests(t *testing.T) {
	tests := []struct {
		name  string
		serve func(Message) (any, *Error)
		want  map[string]any
	}{
		{"method not found by default", nil, map[string]any{"jsonrpc": "2.0", "id": "w-1",
			"error": map[string]any{"code": json.Number("-32601"), "message": "Method not found: span.record"}}},
		{"served", func(m Message) (any, *Error) { return "ok " + m.Method(), nil },
			map[string]any{"jsonrpc": "2.0", "id": "w-1", "result": "ok span.record"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startFake(t)
			c := NewConn(p, p.Stdout(), Options{Serve: tt.serve})
			r, err := c.Call(t.Context(), Request{Method: "ask"})
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.Result)
		})
	}
}

func TestConnReportsRepliesNobodyWaitsFor(t *testing.T) {
	p := startFake(t)
	var stray []any
	c := NewConn(p, p.Stdout(), Options{Unmatched: func(m Message) { id, _ := m.ID(); stray = append(stray, id) }})
	_, err := c.Call(t.Context(), Request{Method: "stray"})
	require.NoError(t, err)
	assert.Equal(t, []any{"nobody"}, stray)
}

func TestConnDigestsTheStringsItIsToldTo(t *testing.T) {
	p := startFake(t)
	c := NewConn(p, p.Stdout(), Options{
		Hash:      func(path []string) bool { return len(path) == 2 && path[0] == "result" && path[1] == "big" },
		NewDigest: func() hash.Hash64 { return fnv.New64a() },
	})
	big := strings.Repeat("x", 1<<20)
	r, err := c.Call(t.Context(), Request{Method: "echo", Params: map[string]any{"big": big, "small": "kept"}})
	require.NoError(t, err)
	res := r.Result.(map[string]any)
	want := fnv.New64a()
	_, _ = want.Write([]byte(big))
	text := res["big"].(jsonstream.Text)
	assert.Equal(t, int64(len(big)), text.N)
	assert.Equal(t, want.Sum64(), text.Sum)
	assert.Equal(t, "kept", res["small"])
}

func TestCallsEndWhenTheOutputDoes(t *testing.T) {
	p := startFake(t)
	c := NewConn(p, p.Stdout(), Options{})
	calls, err := c.Send(Request{Method: "hold"}, Request{Method: "exit", Params: map[string]any{"code": 1}})
	require.NoError(t, err)
	for _, call := range calls {
		_, err := call.Wait(t.Context())
		assert.ErrorIs(t, err, ErrNoReply)
	}
	<-c.Done()
	assert.NoError(t, c.Err())
	ids := func(cs []*Call) (out []any) {
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	// Compared by id: a diff of the calls would print the whole connection.
	assert.Equal(t, ids(calls), ids(c.Pending()), "the calls that never got a reply, oldest first")
	_, err = c.Send(Request{Method: "echo"})
	assert.ErrorIs(t, err, ErrNoReply)
	code, err := p.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, code)
}

func TestWaitStopsAtTheContext(t *testing.T) {
	p := startFake(t)
	c := NewConn(p, p.Stdout(), Options{})
	calls, err := c.Send(Request{Method: "hold"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = calls[0].Wait(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Len(t, c.Pending(), 1)
	_, err = p.Wait(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestCloseEndsTheWorkerAndTheReader(t *testing.T) {
	p := startFake(t)
	c := NewConn(p, p.Stdout(), Options{})
	require.NoError(t, p.Close())
	<-c.Done()
	assert.NoError(t, c.Err(), "a closed output is a clean end")
	code, err := p.Wait(t.Context())
	require.NoError(t, err)
	assert.Equal(t, -1, code)
	assert.Error(t, p.WriteLine([]byte("{}")), "stdin is closed")
}
