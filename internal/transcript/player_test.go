package transcript

import (
	"bufio"
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

// Every goroutine a Player starts (its stdout reader, the drain after a
// failure) must be gone when Play returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echoWorker is an in-process stand-in for the worker: it answers each
// request {"id":N,"params":P} with {"id":N,"result":P}, or with the reply
// set for its method, and exits 0 at the end of its stdin. A KILL ends it
// at once with -1.
type echoWorker struct {
	stdinR  *io.PipeReader
	stdinW  *io.PipeWriter
	stdoutR *io.PipeReader
	stdoutW *io.PipeWriter
	replies map[string]string // method → raw result; "" = no reply at all

	done   chan struct{}
	killed bool
	mu     sync.Mutex
}

func startEchoWorker(replies map[string]string) *echoWorker {
	w := &echoWorker{replies: replies, done: make(chan struct{})}
	w.stdinR, w.stdinW = io.Pipe()
	w.stdoutR, w.stdoutW = io.Pipe()
	go w.serve()
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

func (w *echoWorker) Wait() (int, error) {
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.killed {
		return -1, nil
	}
	return 0, nil
}

func (w *echoWorker) player() *Player {
	return &Player{Stdin: w.stdinW, Stdout: w.stdoutR, Process: w, Timeout: 10 * time.Second, Quiet: 50 * time.Millisecond}
}

func steps(t *testing.T, lines ...string) []Step {
	t.Helper()
	s, err := Parse(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	require.NoError(t, err)
	return s
}

func TestPlayerReplaysAndCaptures(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(nil)
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
	w := startEchoWorker(nil)
	_, err := w.player().Play(steps(t,
		`host {"jsonrpc":"2.0","id":1,"method":"echo","params":"a"}`,
		`worker {"jsonrpc":"2.0","id":1,"result":"b"}`,
		`host {"jsonrpc":"2.0","id":2,"method":"echo","params":"never sent"}`,
	))
	var pe *PlayError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Line)
	code, _ := w.Wait()
	assert.Equal(t, -1, code, "the worker was killed")
}

func TestPlayerFailsOnSilenceAndOnExtraLines(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(map[string]string{"mute": ""})
	p := w.player()
	p.Timeout = 100 * time.Millisecond // the reply never comes: only the bound ends the wait
	_, err := p.Play(steps(t,
		`host {"jsonrpc":"2.0","id":1,"method":"mute","params":{}}`,
		`worker {"jsonrpc":"2.0","id":1,"result":{}}`,
	))
	assert.ErrorIs(t, err, errTimeout)

	w = startEchoWorker(nil)
	_, err = w.player().Play(steps(t,
		`host {"jsonrpc":"2.0","id":1,"method":"echo","params":1}`,
	))
	assert.ErrorContains(t, err, "worker wrote a line the transcript does not expect")
}

func TestPlayerUpdateRewritesExpectations(t *testing.T) {
	t.Parallel()
	w := startEchoWorker(map[string]string{"health": `{"status":"ok"}`})
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
