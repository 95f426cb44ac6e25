package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeHost drives a Conn through pipes, as the Paperclip host drives stdio.
type fakeHost struct {
	t      *testing.T
	conn   *Conn
	toConn *io.PipeWriter
	lines  chan string
	served chan error
}

// lineWait only tells a hung worker from a slow one: a large line echoed
// under -race while the whole suite runs on busy cores can take a while.
const lineWait = 60 * time.Second

func startConn(t *testing.T, h Handler, opts Options) *fakeHost {
	t.Helper()
	opts.Logger = zerolog.Nop()
	return startConnLogged(t, h, opts)
}

// startConnLogged is startConn keeping opts.Logger, for tests of what the
// worker logs.
func startConnLogged(t *testing.T, h Handler, opts Options) *fakeHost {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := New(inR, outW, opts)
	f := &fakeHost{t: t, conn: c, toConn: inW, lines: make(chan string, 4096), served: make(chan error, 1)}
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 256<<20)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
	}()
	go func() {
		err := c.Serve(context.Background(), h)
		outW.Close()
		f.served <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-f.served:
		case <-time.After(lineWait):
			t.Error("Serve did not return")
		}
		for range f.lines {
		}
	})
	return f
}

func (f *fakeHost) send(line string) {
	f.t.Helper()
	_, err := io.WriteString(f.toConn, line+"\n")
	require.NoError(f.t, err)
}

func (f *fakeHost) recv() map[string]any {
	f.t.Helper()
	select {
	case line, ok := <-f.lines:
		require.True(f.t, ok, "output closed")
		var m map[string]any
		require.NoError(f.t, json.Unmarshal([]byte(line), &m), "line: %s", line)
		return m
	case <-time.After(lineWait):
		f.t.Fatal("no line from the worker")
		return nil
	}
}

func (f *fakeHost) recvRaw() string {
	f.t.Helper()
	select {
	case line := <-f.lines:
		return line
	case <-time.After(lineWait):
		f.t.Fatal("no line from the worker")
		return ""
	}
}

func echoHandler() Handler {
	return HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		switch req.Method {
		case "void":
			return nil, nil
		case "echo":
			return req.Params, nil
		case "fail":
			return nil, errors.New("boom")
		case "coded":
			return nil, protocol.Errorf(-32099, "coded failure")
		case "cleanup":
			return nil, fmt.Errorf("wrapped: %w", &protocol.CreationCleanupError{Message: "acquire timed out", Cleanup: protocol.CreationCleanup{ProviderLeaseID: "p", AttemptID: "a"}})
		case "panic":
			panic("kaboom")
		}
		return nil, protocol.MethodNotFound(req.Method)
	})
}

func TestRepliesEchoIDsWithTheirExactJSONType(t *testing.T) {
	t.Parallel()
	f := startConn(t, echoHandler(), Options{})
	for _, id := range []string{`1`, `"1"`, `0`, `-7`, `1.5`, `18446744073709551616`, `"ünïcode"`, `{"a":1}`, `true`} {
		f.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"void"}`)
		line := f.recvRaw()
		assert.Equal(t, `{"jsonrpc":"2.0","id":`+id+`,"result":null}`, line)
	}
}

func TestReplyShapes(t *testing.T) {
	t.Parallel()
	f := startConn(t, echoHandler(), Options{})
	tests := []struct{ send, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"echo","params":{"b":"<&>","a":[1,2]}}`, `{"jsonrpc":"2.0","id":1,"result":{"b":"<&>","a":[1,2]}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"fail"}`, `{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"boom"}}`},
		{`{"jsonrpc":"2.0","id":3,"method":"coded"}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32099,"message":"coded failure"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"nope"}`, `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Unknown method: nope"}}`},
		{`{"jsonrpc":"2.0","id":5,"method":"cleanup"}`, `{"jsonrpc":"2.0","id":5,"error":{"code":-32002,"message":"acquire timed out","data":{"schema":"paperclip/environment-creation-cleanup/v1","cleanup":{"providerLeaseId":"p","companyId":"","environmentId":"","attemptId":"a","accountFingerprint":"","labels":null}}}}`},
		{`not json`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: Invalid JSON: invalid character 'o' in literal null (expecting 'u') at byte offset 2"}}`},
		{`[1,2]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: Invalid or missing jsonrpc version (expected \"2.0\", got undefined)"}}`}, // an array is an object to JavaScript
		{`{"jsonrpc":"2.0","id":null,"method":"void"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a request id must not be null"}}`},
		{`{"jsonrpc":"2.0","id":6,"method":"void"}`, `{"jsonrpc":"2.0","id":6,"result":null}`},
	}
	for _, tt := range tests {
		f.send(tt.send)
		assert.Equal(t, tt.want, f.recvRaw(), "for %s", tt.send)
	}
}

func TestNotificationsFromTheHostAreIgnoredAndBlankLinesSkipped(t *testing.T) {
	t.Parallel()
	f := startConn(t, echoHandler(), Options{})
	f.send(`{"jsonrpc":"2.0","method":"onEvent","params":{"event":{}}}`)
	f.send(``)
	f.send("   \t\r")
	f.send(`{"jsonrpc":"2.0","id":1,"method":"void"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":null}`, f.recvRaw())
}

func TestPanicIsAnsweredAndServingContinues(t *testing.T) {
	t.Parallel()
	f := startConn(t, echoHandler(), Options{})
	f.send(`{"jsonrpc":"2.0","id":1,"method":"panic","paperclipInvocation":{"id":"inv-p","scope":{}}}`)
	logLine := f.recv()
	assert.Equal(t, "log", logLine["method"])
	assert.Equal(t, "inv-p", logLine["paperclipInvocationId"])
	reply := f.recv()
	assert.EqualValues(t, 1, reply["id"])
	errObj := reply["error"].(map[string]any)
	assert.EqualValues(t, protocol.CodeWorkerError, errObj["code"])
	assert.Contains(t, errObj["message"], "kaboom")
	f.send(`{"jsonrpc":"2.0","id":2,"method":"void"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":null}`, f.recvRaw())
}

func TestNotificationsCarryTheInvocationOfTheRequestTheyServe(t *testing.T) {
	t.Parallel()
	var conn *Conn
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		for i := 0; i < 3; i++ {
			if err := conn.Notify(ctx, protocol.NotifyExecuteLog, protocol.ExecuteLog{Stream: "stdout", Chunk: fmt.Sprintf("chunk %d\n", i)}); err != nil {
				return nil, err
			}
		}
		return map[string]int{"exitCode": 0}, nil
	})
	f := startConn(t, h, Options{})
	conn = f.conn
	f.send(`{"jsonrpc":"2.0","id":9,"method":"environmentExecute","params":{},"paperclipInvocation":{"id":"inv-9","scope":{"companyId":"c-1"}}}`)
	for i := 0; i < 3; i++ {
		assert.Equal(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stdout","chunk":"chunk %d\n"},"paperclipInvocationId":"inv-9"}`, i), f.recvRaw())
	}
	assert.Equal(t, `{"jsonrpc":"2.0","id":9,"result":{"exitCode":0}}`, f.recvRaw())
	// Without an invocation, no paperclipInvocationId member at all.
	f.send(`{"jsonrpc":"2.0","id":10,"method":"x"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","method":"execute.log","params":{"stream":"stdout","chunk":"chunk 0\n"}}`, f.recvRaw())
	for i := 0; i < 3; i++ {
		f.recvRaw()
	}
}

func TestRequestsRunConcurrentlyAndRepliesComeOutOfOrder(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		if req.Method == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return req.Method, nil
	})
	f := startConn(t, h, Options{})
	f.send(`{"jsonrpc":"2.0","id":1,"method":"slow"}`)
	f.send(`{"jsonrpc":"2.0","id":2,"method":"fast"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":"fast"}`, f.recvRaw())
	close(release)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":"slow"}`, f.recvRaw())
}

func TestManyConcurrentRequestsAreAllAnsweredOnce(t *testing.T) {
	t.Parallel()
	f := startConn(t, echoHandler(), Options{})
	const n = 1000
	go func() {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"echo","params":%d}`+"\n", i, i)
		}
		_, _ = io.WriteString(f.toConn, b.String())
	}()
	seen := map[float64]bool{}
	for i := 0; i < n; i++ {
		m := f.recv()
		id := m["id"].(float64)
		assert.Equal(t, id, m["result"])
		assert.False(t, seen[id], "duplicate reply %v", id)
		seen[id] = true
	}
	assert.Len(t, seen, n)
}

func TestHugeLinesAreRead(t *testing.T) {
	t.Parallel()
	f := startConn(t, echoHandler(), Options{})
	// Far past any fixed line buffer; the real binary gets 50 MiB lines in
	// its end-to-end test.
	big := strings.Repeat("x", 4<<20)
	go func() {
		_, _ = io.WriteString(f.toConn, `{"jsonrpc":"2.0","id":1,"method":"echo","params":"`+big+`"}`+"\n")
		_, _ = io.WriteString(f.toConn, `{"jsonrpc":"2.0","id":2,"method":"echo","params":"`+big+"\n")
		_, _ = io.WriteString(f.toConn, `{"jsonrpc":"2.0","id":3,"method":"void"}`+"\n")
	}()
	line := f.recvRaw()
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":"`+big+`"}`, line)
	m := f.recv()
	assert.EqualValues(t, protocol.CodeParseError, m["error"].(map[string]any)["code"])
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"result":null}`, f.recvRaw())
}

func TestShutdownDrainsInFlightRequestsThenReplies(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		switch req.Method {
		case "work":
			close(started)
			<-release
			return "done", nil
		case protocol.MethodShutdown:
			return nil, nil
		}
		return nil, nil
	})
	// The grace must outlast the steps below on a stalled machine: past
	// it, shutdown would cancel id 1 and reply before it.
	f := startConn(t, h, Options{ShutdownGrace: 5 * time.Minute})
	f.send(`{"jsonrpc":"2.0","id":1,"method":"work"}`)
	<-started
	f.send(`{"jsonrpc":"2.0","id":2,"method":"shutdown","params":{}}`)
	f.send(`{"jsonrpc":"2.0","id":3,"method":"work"}`)
	// A request after shutdown is refused at once, while id 1 still runs.
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"Worker RPC host is shutting down"}}`, f.recvRaw())
	close(release)
	// The shutdown reply comes after the drained request's reply.
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":"done"}`, f.recvRaw())
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":null}`, f.recvRaw())
	select {
	case err := <-f.served:
		assert.NoError(t, err)
		f.served <- err
	case <-time.After(lineWait):
		t.Fatal("Serve did not return after shutdown")
	}
}

// answererHandler answers "ack" during the shutdown (ShutdownAnswerer).
type answererHandler struct{ HandlerFunc }

func (answererHandler) AnswersDuringShutdown(req *Request) bool { return req.Method == "ack" }

func TestRequestsAShutdownAnswererNamesAreServedWhileTheShutdownDrains(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	h := answererHandler{func(ctx context.Context, req *Request) (any, error) {
		switch req.Method {
		case "work":
			close(started)
			<-release
			return "done", nil
		case "ack":
			return req.Params, nil
		}
		return nil, nil
	}}
	f := startConn(t, h, Options{ShutdownGrace: 5 * time.Minute})
	// Before a shutdown, an ack is an ordinary request.
	f.send(`{"jsonrpc":"2.0","id":1,"method":"ack","params":"a"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":"a"}`, f.recvRaw())
	f.send(`{"jsonrpc":"2.0","id":2,"method":"work"}`)
	<-started
	f.send(`{"jsonrpc":"2.0","id":3,"method":"shutdown","params":{}}`)
	f.send(`{"jsonrpc":"2.0","id":4,"method":"ack","params":"b"}`)
	f.send(`{"jsonrpc":"2.0","id":5,"method":"work"}`)
	// The ack is answered while the drain waits for id 2; other requests
	// are refused. The two answers race each other (the ack is served on a
	// goroutine of its own), so their order is not asserted.
	assert.ElementsMatch(t, []string{
		`{"jsonrpc":"2.0","id":4,"result":"b"}`,
		`{"jsonrpc":"2.0","id":5,"error":{"code":-32000,"message":"Worker RPC host is shutting down"}}`,
	}, []string{f.recvRaw(), f.recvRaw()})
	close(release)
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":"done"}`, f.recvRaw())
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"result":null}`, f.recvRaw())
	select {
	case err := <-f.served:
		assert.NoError(t, err)
		f.served <- err
	case <-time.After(lineWait):
		t.Fatal("Serve did not return after shutdown")
	}
}

func TestShutdownCancelsHandlersThatOutstayTheGrace(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		if req.Method == "forever" {
			close(started)
			<-ctx.Done()
			return nil, fmt.Errorf("cancelled: %w", ctx.Err())
		}
		return nil, nil
	})
	f := startConn(t, h, Options{ShutdownGrace: 50 * time.Millisecond})
	f.send(`{"jsonrpc":"2.0","id":1,"method":"forever"}`)
	<-started
	f.send(`{"jsonrpc":"2.0","id":2,"method":"shutdown"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"cancelled: context canceled"}}`, f.recvRaw())
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":null}`, f.recvRaw())
}

// A handler that outstays its cancellation (its cleanup still waiting on
// something slow) is answered for it before the shutdown reply, and its
// own outcome, when it comes, is dropped: one reply per request.
func TestShutdownAnswersHandlersThatOutstayTheirCancellation(t *testing.T) {
	t.Parallel()
	started, release, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		if req.Method == "stubborn" {
			defer close(returned)
			close(started)
			<-ctx.Done()
			<-release // a cleanup that takes longer than CancelWait
			return "late", nil
		}
		return nil, nil
	})
	logs := &lockedBuffer{}
	f := startConnLogged(t, h, Options{Logger: zerolog.New(logs).Level(zerolog.DebugLevel), ShutdownGrace: 10 * time.Millisecond, CancelWait: 10 * time.Millisecond})
	f.send(`{"jsonrpc":"2.0","id":1,"method":"stubborn"}`)
	<-started
	f.send(`{"jsonrpc":"2.0","id":2,"method":"shutdown"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Worker RPC host is shutting down"}}`, f.recvRaw())
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":null}`, f.recvRaw())
	// Serving is over by now, so a second reply could not reach the host
	// anyway; the log tells that the handler's own was dropped.
	close(release)
	<-returned
	assert.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "handler returned after its request was answered at shutdown")
	}, lineWait, time.Millisecond, "logs: %s", logs)
}

func TestEndOfInputCancelsHandlersAndReturnsEOF(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	f := startConn(t, h, Options{})
	f.send(`{"jsonrpc":"2.0","id":1,"method":"forever"}`)
	<-started
	f.toConn.Close()
	select {
	case err := <-f.served:
		assert.ErrorIs(t, err, io.EOF)
		f.served <- err
	case <-time.After(lineWait):
		t.Fatal("Serve did not return at end of input")
	}
}

func TestCallsToTheHost(t *testing.T) {
	t.Parallel()
	var conn *Conn
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		var out any
		err := conn.Call(ctx, protocol.CallSpanRecord, protocol.SpanRecord{Name: "session.open"}, &out)
		if err != nil {
			return nil, err
		}
		return out, nil
	})
	// Long enough for the answered calls' round trips on a loaded machine;
	// the unanswered one waits it out.
	f := startConn(t, h, Options{CallTimeout: 2 * time.Second})
	conn = f.conn

	f.send(`{"jsonrpc":"2.0","id":1,"method":"x","paperclipInvocation":{"id":"inv-1","scope":{}}}`)
	call := f.recv()
	assert.Equal(t, "span.record", call["method"])
	assert.EqualValues(t, 1, call["id"], "worker→host ids start at 1")
	assert.Equal(t, "inv-1", call["paperclipInvocationId"])
	f.send(`{"jsonrpc":"2.0","id":1,"result":{"ok":true}}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{"ok":true}}`, f.recvRaw())

	// The host answers with an error: it comes back with its code.
	f.send(`{"jsonrpc":"2.0","id":2,"method":"x"}`)
	call = f.recv()
	assert.EqualValues(t, 2, call["id"])
	_, hasInvocation := call["paperclipInvocationId"]
	assert.False(t, hasInvocation)
	f.send(`{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"denied"}}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"denied"}}`, f.recvRaw())

	// The host never answers: -32003 after the call timeout.
	f.send(`{"jsonrpc":"2.0","id":3,"method":"x"}`)
	call = f.recv()
	assert.EqualValues(t, 3, call["id"])
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"error":{"code":-32003,"message":"Worker→host call \"span.record\" timed out after 2000ms"}}`, f.recvRaw())

	// A stray response and a malformed error object do not disturb serving.
	f.send(`{"jsonrpc":"2.0","id":999,"result":1}`)
	f.send(`{"jsonrpc":"2.0","id":"nope","error":"bad"}`)
	f.send(`{"jsonrpc":"2.0","id":4,"method":"x"}`)
	call = f.recv()
	f.send(`{"jsonrpc":"2.0","id":` + fmt.Sprint(call["id"]) + `,"error":{"code":"not a number"}}`)
	m := f.recv()
	assert.EqualValues(t, 4, m["id"])
	assert.EqualValues(t, protocol.CodeInternalError, m["error"].(map[string]any)["code"])
}

func TestConcurrentWritesNeverInterleave(t *testing.T) {
	t.Parallel()
	var conn *Conn
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = conn.Notify(ctx, protocol.NotifyLog, protocol.Log{Level: "info", Message: strings.Repeat("y", 100_000)})
			}()
		}
		wg.Wait()
		return nil, nil
	})
	f := startConn(t, h, Options{})
	conn = f.conn
	for i := 0; i < 5; i++ {
		f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"x"}`, i))
	}
	for i := 0; i < 5*21; i++ {
		line := f.recvRaw()
		require.True(t, json.Valid([]byte(line)), "line %d is not one JSON value", i)
	}
}

// serialHandler records the order requests with a "key" param run in, and
// lets "block" requests wait until released.
type serialHandler struct {
	mu      sync.Mutex
	order   []string
	release chan struct{}
}

func (h *serialHandler) SerialKey(req *Request) string {
	var p struct{ Key string }
	_ = json.Unmarshal(req.Params, &p)
	return p.Key
}

func (h *serialHandler) Handle(ctx context.Context, req *Request) (any, error) {
	var p struct{ Key, Name string }
	_ = json.Unmarshal(req.Params, &p)
	if req.Method == "block" {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	h.mu.Lock()
	h.order = append(h.order, p.Name)
	h.mu.Unlock()
	return p.Name, nil
}

func TestRequestsWithOneSerialKeyRunInArrivalOrder(t *testing.T) {
	t.Parallel()
	h := &serialHandler{release: make(chan struct{})}
	f := startConn(t, h, Options{})
	// The first request of key a blocks; the rest of a must wait behind it,
	// in order, while key b and unkeyed requests go ahead.
	f.send(`{"jsonrpc":"2.0","id":1,"method":"block","params":{"key":"a","name":"a1"}}`)
	var b strings.Builder
	for i := 2; i <= 50; i++ {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"run","params":{"key":"a","name":"a%d"}}`+"\n", i, i)
	}
	b.WriteString(`{"jsonrpc":"2.0","id":"b","method":"run","params":{"key":"b","name":"b1"}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":"u","method":"run","params":{"name":"u1"}}` + "\n")
	_, err := io.WriteString(f.toConn, b.String())
	require.NoError(t, err)
	got := map[string]bool{}
	for len(got) < 2 {
		got[fmt.Sprint(f.recv()["id"])] = true
	}
	assert.Equal(t, map[string]bool{"b": true, "u": true}, got, "other keys do not wait")
	close(h.release)
	for i := 1; i <= 50; i++ {
		assert.EqualValues(t, i, f.recv()["id"], "replies of one key come in request order")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var a []string
	for _, name := range h.order {
		if strings.HasPrefix(name, "a") {
			a = append(a, name)
		}
	}
	require.Len(t, a, 50)
	for i, name := range a {
		assert.Equal(t, fmt.Sprintf("a%d", i+1), name)
	}
}

// arrivalHandler records the order Arrived sees requests in, and checks
// that each handler starts only after its request was seen.
type arrivalHandler struct {
	mu      sync.Mutex
	arrived []string
	seen    map[*Request]bool
	unseen  int
}

func (h *arrivalHandler) Arrived(req *Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived = append(h.arrived, string(req.ID))
	h.seen[req] = true
}

func (h *arrivalHandler) Handle(ctx context.Context, req *Request) (any, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.seen[req] {
		h.unseen++
	}
	return nil, nil
}

func TestArrivalObserverSeesRequestsInArrivalOrderBeforeTheirHandlers(t *testing.T) {
	t.Parallel()
	h := &arrivalHandler{seen: map[*Request]bool{}}
	f := startConn(t, h, Options{})
	var b strings.Builder
	var want []string
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"run"}`+"\n", i)
		want = append(want, strconv.Itoa(i))
	}
	_, err := io.WriteString(f.toConn, b.String())
	require.NoError(t, err)
	for range want {
		f.recv()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, want, h.arrived)
	assert.Zero(t, h.unseen, "no handler starts before its request is observed")
}

func TestAfterReplyRunsOnceTheReplyIsWritten(t *testing.T) {
	t.Parallel()
	var conn *Conn
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		ok := AfterReply(ctx, func(written bool) {
			_ = conn.Notify(context.Background(), "after", map[string]any{"written": written, "method": req.Method})
		})
		if !ok {
			return nil, errors.New("no hook")
		}
		if req.Method == "fail" {
			return nil, errors.New("boom")
		}
		return "done", nil
	})
	f := startConn(t, h, Options{})
	conn = f.conn
	f.send(`{"jsonrpc":"2.0","id":1,"method":"ok"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":"done"}`, f.recvRaw())
	assert.Equal(t, `{"jsonrpc":"2.0","method":"after","params":{"method":"ok","written":true}}`, f.recvRaw())
	f.send(`{"jsonrpc":"2.0","id":2,"method":"fail"}`)
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"boom"}}`, f.recvRaw())
	assert.Equal(t, `{"jsonrpc":"2.0","method":"after","params":{"method":"fail","written":false}}`, f.recvRaw())
	assert.False(t, AfterReply(context.Background(), func(bool) {}), "no hook outside a request")
}

// Calls dispatched one after another are written in that order before
// Dispatch returns, whatever order the host answers them in.
func TestDispatchWritesCallsInOrder(t *testing.T) {
	t.Parallel()
	var conn *Conn
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		var waits []func(any) error
		for _, name := range []string{"a", "b", "c"} {
			wait, err := conn.Dispatch(ctx, protocol.CallSpanRecord, protocol.SpanRecord{Name: name})
			if err != nil {
				return nil, err
			}
			waits = append(waits, wait)
		}
		var got []string
		for _, wait := range waits {
			var out struct{ Name string }
			if err := wait(&out); err != nil {
				return nil, err
			}
			got = append(got, out.Name)
		}
		return got, nil
	})
	f := startConn(t, h, Options{})
	conn = f.conn
	f.send(`{"jsonrpc":"2.0","id":1,"method":"x"}`)
	var ids []float64
	for _, want := range []string{"a", "b", "c"} {
		call := f.recv()
		require.Equal(t, "span.record", call["method"])
		assert.Equal(t, want, call["params"].(map[string]any)["name"])
		ids = append(ids, call["id"].(float64))
	}
	for i := len(ids) - 1; i >= 0; i-- {
		f.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%v,"result":{"name":%q}}`, ids[i], []string{"a", "b", "c"}[i]))
	}
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":["a","b","c"]}`, f.recvRaw())
}
