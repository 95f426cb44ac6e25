package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Every goroutine a test starts (the echo worker's, which the player
// drives) must be gone when it ends.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echoWorker is an in-process stand-in for the worker, a Worker the player
// drives: it answers each request {"id":N,"params":P} with
// {"id":N,"result":P}, or with the reply set for its method, and exits 0 at
// the end of its stdin. A KILL ends it at once with -1.
type echoWorker struct {
	stdinR  *io.PipeReader
	stdinW  *io.PipeWriter
	stdoutW *io.PipeWriter
	replies map[string]string // method → raw result; "" = no reply at all
	lines   chan []byte       // what it wrote, line by line; closed at the end

	done   chan struct{}
	killed bool
	mu     sync.Mutex
}

// startEchoWorker starts one; the test's clean-up ends it and its reader.
func startEchoWorker(t *testing.T, replies map[string]string) *echoWorker {
	w := &echoWorker{replies: replies, lines: make(chan []byte), done: make(chan struct{})}
	w.stdinR, w.stdinW = io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	w.stdoutW = stdoutW
	go w.serve()
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			w.lines <- bytes.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		_ = w.Signal(syscall.SIGKILL)
		for range w.lines {
		}
	})
	return w
}

func (w *echoWorker) serve() {
	defer close(w.done)
	defer w.stdoutW.Close()
	sc := bufio.NewScanner(w.stdinR)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil {
			continue
		}
		result := string(req.Params)
		if r, ok := w.replies[req.Method]; ok {
			if r == "" {
				continue
			}
			result = r
		}
		if _, err := io.WriteString(w.stdoutW, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+"}\n"); err != nil {
			return
		}
	}
}

func (w *echoWorker) WriteLine(line []byte) error {
	_, err := w.stdinW.Write(append(bytes.Clone(line), '\n'))
	return err
}

func (w *echoWorker) ReadLine(ctx context.Context) ([]byte, error) {
	select {
	case line, ok := <-w.lines:
		if !ok {
			return nil, io.EOF
		}
		return line, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (w *echoWorker) CloseStdin() error { return w.stdinW.Close() }

func (w *echoWorker) Signal(sig os.Signal) error {
	if sig == syscall.SIGKILL {
		w.mu.Lock()
		w.killed = true
		w.mu.Unlock()
		w.stdinR.CloseWithError(errors.New("killed"))
		w.stdoutW.CloseWithError(errors.New("killed"))
	}
	return nil
}

func (w *echoWorker) Wait(context.Context) (int, error) {
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.killed {
		return -1, nil
	}
	return 0, nil
}

func (w *echoWorker) player() *Player {
	return &Player{Worker: w, Timeout: 10 * time.Second, Quiet: 50 * time.Millisecond}
}

func steps(t *testing.T, lines ...string) []Step {
	t.Helper()
	s, err := Parse(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	require.NoError(t, err)
	return s
}

func TestPlayerReplaysAndCaptures(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(t, nil)
	out, err := w.player().Play(steps(t,
		`# a comment is kept`,
		`host {"jsonrpc":"2.0","id":1,"method":"echo","params":{"token":"t-1"}}`,
		`worker {"jsonrpc":"2.0","id":1,"result":{"token":"<capture:TOK>"}}`,
		`host {"jsonrpc":"2.0","id":2,"method":"echo","params":"${TOK}"}`,
		`worker {"jsonrpc":"2.0","id":2,"result":"t-1"}`,
		`close_stdin`,
		`exit 0`,
	))
	require.NoError(t, err)
	assert.Nil(t, out, "nothing to write back without Update")
}

func TestPlayerFailsOnAnUnexpectedLineAndEndsTheWorker(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(t, nil)
	_, err := w.player().Play(steps(t,
		`host {"jsonrpc":"2.0","id":1,"method":"echo","params":"a"}`,
		`worker {"jsonrpc":"2.0","id":1,"result":"b"}`,
		`host {"jsonrpc":"2.0","id":2,"method":"echo","params":"never sent"}`,
	))
	var pe *PlayError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Line)
	code, _ := w.Wait(context.Background())
	assert.Equal(t, -1, code, "the worker was killed")
}

func TestPlayerFailsOnSilenceAndOnExtraLines(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(t, map[string]string{"mute": ""})
	p := w.player()
	p.Timeout = 100 * time.Millisecond // the reply never comes: only the bound ends the wait
	_, err := p.Play(steps(t,
		`host {"jsonrpc":"2.0","id":1,"method":"mute","params":{}}`,
		`worker {"jsonrpc":"2.0","id":1,"result":{}}`,
	))
	assert.ErrorIs(t, err, errTimeout)

	w = startEchoWorker(t, nil)
	_, err = w.player().Play(steps(t,
		`host {"jsonrpc":"2.0","id":1,"method":"echo","params":1}`,
	))
	assert.ErrorContains(t, err, "worker wrote a line the transcript does not expect")
}

func TestPlayerUpdateRewritesExpectations(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(t, map[string]string{"health": `{"status":"ok"}`})
	p := w.player()
	p.Update = true
	out, err := p.Play(steps(t,
		`host {"jsonrpc":"2.0","id":1,"method":"health","params":{}}`,
		`worker {"jsonrpc":"2.0","id":1,"result":{"status":"stale"}}`,
	))
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"status":"ok"}}`, string(out[1].Worker))
}

func TestOrderRepliesSortsOnlyReplies(t *testing.T) {
	lines := [][]byte{
		[]byte(`{"jsonrpc":"2.0","method":"log","params":{"message":"a"}}`),
		[]byte(`{"jsonrpc":"2.0","id":42,"result":{"status":"ok"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"log","params":{"message":"b"}}`),
		[]byte(`{"jsonrpc":"2.0","id":41,"result":{"status":"ok"}}`),
		[]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`),
	}
	orderReplies(lines)
	want := []string{
		`{"jsonrpc":"2.0","method":"log","params":{"message":"a"}}`,
		`{"jsonrpc":"2.0","id":41,"result":{"status":"ok"}}`,
		`{"jsonrpc":"2.0","method":"log","params":{"message":"b"}}`,
		`{"jsonrpc":"2.0","id":42,"result":{"status":"ok"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
	}
	got := make([]string, len(lines))
	for i, b := range lines {
		got[i] = string(b)
	}
	require.Equal(t, want, got)
}

// In collect mode each step with output hands over what the worker wrote
// during it: a request's lines up to its reply, a raw line's replies in id
// order, what comes after close_stdin up to the exit.
func TestPlayerCollectsEachStepsOutput(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(t, nil)
	p := w.player()
	p.Vars = Vars{"CFG": json.RawMessage(`{"k":1}`)}
	type got struct {
		i     int
		lines []string
		reply int
	}
	var outs []got
	p.Collect = func(i int, lines [][]byte, reply int) error {
		g := got{i: i, reply: reply}
		for _, l := range lines {
			g.lines = append(g.lines, string(l))
		}
		outs = append(outs, g)
		return nil
	}
	_, err := p.Play(steps(t,
		`host {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": "${CFG}"}`,
		`host_raw "{\"id\":3,\"method\":\"echo\",\"params\":3}\n{\"id\":2,\"method\":\"echo\",\"params\":2}"`,
		`  replies 2`,
		`close_stdin`,
	))
	require.NoError(t, err)
	assert.Equal(t, []got{
		{0, []string{`{"jsonrpc":"2.0","id":1,"result":{"k":1}}`}, 0},
		{1, []string{`{"jsonrpc":"2.0","id":2,"result":2}`, `{"jsonrpc":"2.0","id":3,"result":3}`}, 1},
		{2, []string{`{"exit":0}`}, -1},
	}, outs)

	p = startEchoWorker(t, nil).player()
	p.Collect = func(int, [][]byte, int) error { return nil }
	_, err = p.Play(steps(t, `worker {}`))
	assert.ErrorContains(t, err, "collect mode takes no expectations")
}
