package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/rpc"
)

// servedWorker is a worker behind a real rpc.Conn, fed through a pipe.
type servedWorker struct {
	w     *Worker
	in    *io.PipeWriter
	lines *bufio.Scanner
}

func serveWorker(t *testing.T) *servedWorker {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn := rpc.New(inR, outW, rpc.Options{Logger: zerolog.Nop()})
	w := New(conn, Options{Logger: zerolog.Nop()})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = conn.Serve(context.Background(), w)
		_ = outW.Close()
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		<-done
		_ = w.Close(context.Background())
	})
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	return &servedWorker{w: w, in: inW, lines: sc}
}

// replies reads lines until n replies came, returning their ids in order.
func (s *servedWorker) replies(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for len(ids) < n {
		require.True(t, s.lines.Scan(), "the worker's output ended: %v", s.lines.Err())
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Error  json.RawMessage `json:"error"`
		}
		require.NoError(t, json.Unmarshal(s.lines.Bytes(), &m))
		if m.Method != "" {
			continue
		}
		require.Nil(t, m.Error, "reply %s", s.lines.Text())
		ids = append(ids, string(m.ID))
	}
	return ids
}

// Commands sent together on one lease run in its one session shell one
// after another; the plugin dispatches them in the order the host sent
// them, and so must the worker, whatever order its goroutines start in.
func TestSessionCommandsSentTogetherRunInTheOrderSent(t *testing.T) {
	t.Parallel()
	env := emulatortest.Start(t, emulator.Options{})
	s := serveWorker(t)
	l := acquireThroughHandler(t, s.w, env.APIKey, env.APIURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	order := filepath.Join(t.TempDir(), "order")
	for round, warm := range []bool{false, true} { // the session's first commands, then an open session
		require.NoError(t, os.WriteFile(order, nil, 0o666))
		const n = 12
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"environmentExecute","params":{%s,"lease":{"providerLeaseId":%q},"command":"sh","args":["-c","echo %d >> %s"]}}`+"\n",
				round*100+i, l.base, l.id, i, order)
		}
		_, err := io.WriteString(s.in, b.String())
		require.NoError(t, err)
		s.replies(t, n)
		got, err := os.ReadFile(order)
		require.NoError(t, err)
		var want strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&want, "%d\n", i)
		}
		assert.Equal(t, want.String(), string(got), "warm session: %v", warm)
	}
	require.NoError(t, l.destroy(ctx))
}

// The order holds nobody up for ever: a later command waits for an earlier
// one only while that one has not been dispatched, and never for one that
// uploads its stdin or for one of another lease.
func TestExecTurnWaitsOnlyForEarlierCommandsOfItsLease(t *testing.T) {
	t.Parallel()
	o := newExecOrder()
	reqs := make([]*rpc.Request, 4)
	for i := range reqs {
		reqs[i] = &rpc.Request{Method: "environmentExecute"}
		o.arrive(reqs[i])
	}
	a, other, parked, last := o.take(reqs[0]), o.take(reqs[1]), o.take(reqs[2]), o.take(reqs[3])
	last.bind("L")
	held, _ := last.blocked()
	assert.True(t, held, "earlier executes not decoded yet hold it up")
	other.bind("M")
	parked.bind("L")
	parked.park()
	held, _ = last.blocked()
	assert.True(t, held, "an earlier command of its lease holds it up")
	a.bind("L")
	go a.done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	last.wait(ctx, func() bool { return false })
	require.NoError(t, ctx.Err(), "it goes once the earlier command of its lease is dispatched")
	held, _ = last.blocked()
	assert.False(t, held, "a parked command and another lease's hold nobody up")
	parked.unpark()
	held, _ = last.blocked()
	assert.True(t, held)
	start := time.Now()
	last.wait(ctx, func() bool { return true })
	assert.Less(t, time.Since(start), time.Second, "a teardown of the lease ends the wait")
	o2 := newExecOrder()
	slow, next := &rpc.Request{}, &rpc.Request{}
	o2.arrive(slow)
	o2.arrive(next)
	o2.take(slow) // still decoding (a large stdin, say)
	n := o2.take(next)
	n.bind("L")
	start = time.Now()
	n.wait(ctx, func() bool { return false })
	assert.Less(t, time.Since(start), maxTurnWait/2, "an execute that takes long to decode holds others up only briefly")
	var none *execTurn
	none.bind("L")
	none.wait(ctx, func() bool { return false })
	none.done()
}
