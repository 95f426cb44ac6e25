package main

// End-to-end checks of environmentExecute: the real binary, driven as the
// host drives it, against the in-process emulator (real shells, real
// processes). The host side is hand-written here rather than a transcript
// because these checks need concurrency, hashing of large outputs and
// emulator manipulation in the middle of a request.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/jsonstream"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
)

// ---- digests of large outputs ----

// digestSeed keys the digests of one test run. The digests check that large
// outputs arrived intact without keeping them; maphash rather than a
// cryptographic hash, so that in the relay benchmark the checking host takes
// as little as possible of the CPU the worker under test needs.
var digestSeed = maphash.MakeSeed()

func newDigest() *maphash.Hash {
	h := &maphash.Hash{}
	h.SetSeed(digestSeed)
	return h
}

// digestOf is the digest of p.
func digestOf(p []byte) uint64 { return maphash.Bytes(digestSeed, p) }

// ---- the host ----

// host drives one worker as Paperclip's host does, on a workerhost.Conn:
// requests carry ids and invocation ids, and execute.log notifications are
// collected per invocation.
type host struct {
	t    testing.TB
	w    hostWorker
	conn *workerhost.Conn

	mu          sync.Mutex
	invocations map[string]*invocationLog
	unexpected  []string
	hashResults bool
	terms       *terminalRoutes // login PTY and duplex routes, as the host keeps them
	spans       []hostSpan      // span.record calls, in arrival order
	meter       *lineMeter      // with hostOptions.meterLines
}

// hostWorker is the worker a host drives: a workerhost.Process, or the
// worker run in this process on pipes.
type hostWorker interface {
	io.Writer
	CloseStdin() error
	Wait(ctx context.Context) (int, error)
	Pid() int // 0 in this process
}

// lineMeter passes the worker's output through, measuring its lines in
// UTF-16 code units (JavaScript's length, which the host's limit counts).
type lineMeter struct {
	r       io.Reader
	current int64
	longest atomic.Int64
}

func (m *lineMeter) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '\n':
			if m.current > m.longest.Load() {
				m.longest.Store(m.current)
			}
			m.current = 0
		case c&0xC0 == 0x80: // a continuation byte
		case c >= 0xF0: // a four-byte sequence: a surrogate pair
			m.current += 2
		default:
			m.current++
		}
	}
	return n, err
}

// hostSpan is one span.record call the worker made.
type hostSpan struct {
	Invocation string
	Record     map[string]any
}

type reply = workerhost.Reply

// invocationLog is what execute.log delivered for one invocation.
type invocationLog struct {
	stdout, stderr   bytes.Buffer // unless hashed
	outHash, errHash hashCounter
	outPieces        []loggedPiece // the stdout chunks, when hashed
	hashed           bool
	chunks           int
	maxChunkUnits    int // the largest chunk in UTF-16 units (the host's limit), or bytes below it
	afterReply       int // notifications that came after the reply
	replied          bool
	firstAt, lastAt  time.Time // arrival of the first and the last chunk
}

// loggedPiece stands for one hashed execute.log chunk: enough to find it
// in an output none of whose stretches of 128 bytes occurs twice.
type loggedPiece struct {
	n    int
	sum  uint64
	head string // its first 128 bytes
}

type hashCounter struct {
	h *maphash.Hash
	n int64
}

func (c *hashCounter) write(p []byte) {
	if c.h == nil {
		c.h = newDigest()
	}
	_, _ = c.h.Write(p)
	c.n += int64(len(p))
}

func (c *hashCounter) sum() uint64 {
	if c.h == nil {
		c.h = newDigest()
	}
	return c.h.Sum64()
}

type hostOptions struct {
	// hashResults streams result stdout/stderr and execute.log chunks into
	// hashes instead of keeping them.
	hashResults bool
	env         []string
	args        []string // worker flags
	// meterLines measures every line the worker writes in UTF-16 units,
	// as the host's line limit (MAX_WORKER_MESSAGE_CHARS) counts them.
	meterLines bool
}

func startHost(t testing.TB, opts hostOptions) *host {
	t.Helper()
	p := startWorker(t, opts.env, opts.args...)
	return newHost(t, p, p.Stdout(), opts)
}

// newHost initializes the worker that writes to w and whose output is
// stdout, and serves that output.
func newHost(t testing.TB, w hostWorker, stdout io.Reader, opts hostOptions) *host {
	t.Helper()
	var meter *lineMeter
	if opts.meterLines {
		meter = &lineMeter{r: stdout}
		stdout = meter
	}
	h := &host{t: t, w: w, meter: meter, invocations: map[string]*invocationLog{},
		hashResults: opts.hashResults, terms: newTerminalRoutes()}
	o := workerhost.Options{
		NewID:     func(n int64) any { return fmt.Sprintf("r-%d", n) },
		Notify:    h.notify,
		Serve:     h.serve,
		Unmatched: func(m workerhost.Message) { h.surprise("reply to an id nobody waits for: %.300v", map[string]any(m)) },
		NewDigest: func() hash.Hash64 { return newDigest() },
		// Output chunks come in the reader's memory and are copied only
		// where kept (the relay benchmark's host then allocates nothing
		// per chunk).
		Raw: func(p []string) bool { return len(p) == 2 && p[0] == "params" && p[1] == "chunk" },
	}
	if opts.hashResults {
		o.Hash = func(p []string) bool {
			return len(p) == 2 && p[0] == "result" && (p[1] == "stdout" || p[1] == "stderr")
		}
	}
	h.conn = workerhost.NewConn(w, stdout, o)
	res := h.call("initialize", map[string]any{"manifest": map[string]any{}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "t", "hostVersion": "1"}, "apiVersion": 1}, "").wait()
	require.Nil(t, res.Error)
	return h
}

func (h *host) surprise(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unexpected = append(h.unexpected, fmt.Sprintf(format, args...))
}

// serve answers the worker's own requests: span.record is the only one.
func (h *host) serve(m workerhost.Message) (any, *workerhost.Error) {
	if m.Method() != "span.record" {
		h.surprise("unexpected request %.300v", map[string]any(m))
		return nil, &workerhost.Error{Code: -32601, Message: "not served by the test host"}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spans = append(h.spans, hostSpan{Invocation: m.Invocation(), Record: m.Params()})
	return nil, nil
}

func (h *host) notify(m workerhost.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	method, params := m.Method(), m.Params()
	switch method {
	case "log":
	case "span.record":
		h.spans = append(h.spans, hostSpan{Invocation: m.Invocation(), Record: params})
	case "loginPty.output", "loginPty.exit", "duplexChannel.data", "duplexChannel.exit":
		if _, has := m["paperclipInvocationId"]; has {
			h.unexpected = append(h.unexpected, fmt.Sprintf("%s carries an invocation id", method))
		}
		if b, ok := params["chunk"].(jsonstream.Bytes); ok {
			// Read as Raw (see newHost); terminals keep their chunks.
			params["chunk"] = string(b)
		}
		h.terms.notify(method, params)
	case "execute.log":
		h.executeLog(m.Invocation(), params)
	default:
		h.unexpected = append(h.unexpected, fmt.Sprintf("unexpected message %.300v", map[string]any(m)))
	}
}

// executeLog records one execute.log notification, under h.mu.
func (h *host) executeLog(inv string, params map[string]any) {
	stream, _ := params["stream"].(string)
	chunk, _ := params["chunk"].(jsonstream.Bytes)
	l := h.logLocked(inv)
	if inv == "" {
		h.unexpected = append(h.unexpected, "execute.log without paperclipInvocationId")
	}
	if l.replied {
		l.afterReply++
	}
	l.lastAt = time.Now()
	if l.chunks == 0 {
		l.firstAt = l.lastAt
	}
	l.chunks++
	// UTF-16 units never outnumber UTF-8 bytes: only a chunk that could
	// break the host's limit needs counting.
	units := len(chunk)
	if units >= 1_000_000 {
		units = utf16Len(string(chunk))
	}
	l.maxChunkUnits = max(l.maxChunkUnits, units)
	if len(chunk) == 0 {
		h.unexpected = append(h.unexpected, "empty execute.log chunk for "+inv)
	}
	switch {
	case stream == "stdout" && l.hashed:
		l.outHash.write(chunk)
		l.outPieces = append(l.outPieces, loggedPiece{n: len(chunk), sum: digestOf(chunk), head: string(chunk[:min(128, len(chunk))])})
	case stream == "stdout":
		l.stdout.Write(chunk)
	case stream == "stderr" && l.hashed:
		l.errHash.write(chunk)
	case stream == "stderr":
		l.stderr.Write(chunk)
	default:
		h.unexpected = append(h.unexpected, "execute.log with stream "+stream)
	}
}

// utf16Len is the length of s in JavaScript string units.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++ // a surrogate pair
		}
	}
	return n
}

func (h *host) logLocked(inv string) *invocationLog {
	l := h.invocations[inv]
	if l == nil {
		l = &invocationLog{hashed: h.hashResults}
		h.invocations[inv] = l
	}
	return l
}

// logs returns a copy of what execute.log delivered for inv so far.
func (h *host) logs(inv string) (stdout, stderr string, l invocationLog) {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.logLocked(inv)
	return got.stdout.String(), got.stderr.String(), invocationLog{
		hashed: got.hashed, chunks: got.chunks, maxChunkUnits: got.maxChunkUnits,
		afterReply: got.afterReply, replied: got.replied, firstAt: got.firstAt, lastAt: got.lastAt,
		outHash: got.outHash, errHash: got.errHash, outPieces: slices.Clone(got.outPieces),
	}
}

// pending is a request in flight.
type pending struct {
	h         *host
	call      *workerhost.Call
	repliedAt time.Time // under h.mu
}

// rawParams are params already encoded as JSON.
type rawParams []byte

type request struct {
	method      string
	params      any
	invocation  string
	traceparent string
	onReply     func(reply) // run under h.mu as the reply is read
}

// recordedSpans returns the span.record calls made for an invocation.
func (h *host) recordedSpans(inv string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, s := range h.spans {
		if s.Invocation == inv {
			out = append(out, s.Record)
		}
	}
	return out
}

// send writes requests in one write, as a host with many runs would.
func (h *host) send(reqs ...request) []*pending {
	h.t.Helper()
	out := make([]*pending, len(reqs))
	wire := make([]workerhost.Request, len(reqs))
	for i, r := range reqs {
		p := &pending{h: h}
		out[i] = p
		wire[i] = workerhost.Request{Method: r.method, Params: r.params, OnReply: func(rep reply) {
			h.mu.Lock()
			defer h.mu.Unlock()
			p.repliedAt = rep.At
			if r.invocation != "" {
				h.logLocked(r.invocation).replied = true
			}
			if r.onReply != nil {
				r.onReply(rep)
			}
		}}
		if raw, ok := r.params.(rawParams); ok {
			wire[i].Params = json.RawMessage(raw)
		}
		if r.invocation != "" {
			inv := map[string]any{"id": r.invocation, "scope": map[string]any{"companyId": "c-1"}}
			if r.traceparent != "" {
				inv["traceparent"] = r.traceparent
			}
			wire[i].Members = map[string]any{"paperclipInvocation": inv}
		}
	}
	calls, err := h.conn.Send(wire...)
	require.NoError(h.t, err)
	for i, c := range calls {
		out[i].call = c
	}
	return out
}

func (h *host) call(method string, params any, invocation string) *pending {
	h.t.Helper()
	return h.send(request{method: method, params: params, invocation: invocation})[0]
}

// wait returns the reply, failing the test after a generous bound.
func (p *pending) wait() reply {
	p.h.t.Helper()
	return p.waitFor(90 * time.Second)
}

func (p *pending) waitFor(d time.Duration) reply {
	p.h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r, err := p.call.Wait(ctx)
	if err != nil {
		p.h.t.Fatal(err)
	}
	return r
}

// replyTime is when the reply to p arrived (zero if it has not).
func (h *host) replyTime(p *pending) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return p.repliedAt
}

// checkClean fails the test on protocol surprises seen so far.
func (h *host) checkClean() {
	h.t.Helper()
	assert.NoError(h.t, h.conn.Err())
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Empty(h.t, h.unexpected, "unexpected traffic from the worker")
	assert.Empty(h.t, h.terms.violations, "traffic for which the host would retire the worker")
	assert.Empty(h.t, h.terms.anomalies, "terminal frames the host would drop or end a route for")
	for inv, l := range h.invocations {
		assert.Zero(h.t, l.afterReply, "execute.log of %s after its reply", inv)
		assert.Less(h.t, l.maxChunkUnits, 1_000_000, "an execute.log chunk of %s exceeds the host's limit", inv)
	}
}

// hangUp closes the worker's input, reads its output to the end and
// returns its exit code.
func (h *host) hangUp() int {
	h.t.Helper()
	_ = h.w.CloseStdin()
	select {
	case <-h.conn.Done():
	case <-time.After(30 * time.Second):
		h.t.Fatal("the worker did not close stdout")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := h.w.Wait(ctx)
	require.NoError(h.t, err)
	return code
}

// shutdown ends the worker cleanly.
func (h *host) shutdown() {
	h.t.Helper()
	r := h.call("shutdown", map[string]any{}, "").wait()
	assert.Nil(h.t, r.Error)
	assert.Equal(h.t, 0, h.hangUp())
	h.checkClean()
}

// ---- leases and executes ----

type lease struct {
	id, remoteCwd string
	cfg           json.RawMessage
}

func baseParams(cfg json.RawMessage) map[string]any {
	return map[string]any{"driverKey": "daytona", "companyId": "c-1", "environmentId": "env-1", "issueId": "iss-1", "config": cfg}
}

func (h *host) acquire(cfg json.RawMessage) lease {
	h.t.Helper()
	p := baseParams(cfg)
	p["runId"] = "run-1"
	r := h.call("environmentAcquireLease", p, "").wait()
	require.Nil(h.t, r.Error, "acquire: %v", r.Error)
	res := r.Result.(map[string]any)
	meta := res["metadata"].(map[string]any)
	return lease{id: res["providerLeaseId"].(string), remoteCwd: meta["remoteCwd"].(string), cfg: cfg}
}

// releaseParams are the params of a release (or destroy) of l; extra adds
// members (cancelActiveWork ...).
func (h *host) releaseParams(l lease, extra map[string]any) map[string]any {
	p := baseParams(l.cfg)
	p["providerLeaseId"] = l.id
	p["leaseMetadata"] = map[string]any{}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func (h *host) destroy(l lease) {
	h.t.Helper()
	r := h.call("environmentDestroyLease", h.releaseParams(l, nil), "").wait()
	require.Nil(h.t, r.Error, "destroy: %v", r.Error)
	assert.Equal(h.t, map[string]any{"providerLeaseId": l.id, "state": "destroyed"}, r.Result)
}

// cmdSpec is one environmentExecute.
type cmdSpec struct {
	command   string
	args      []string
	cwd       *string
	env       map[string]string
	stdin     *string
	timeoutMs float64
	bypass    bool
}

func strp(s string) *string { return &s }

func (h *host) executeParams(l lease, e cmdSpec) map[string]any { return executeParams(l, e) }

// executeParams are the params of an environmentExecute of e on l.
func executeParams(l lease, e cmdSpec) map[string]any {
	p := baseParams(l.cfg)
	p["lease"] = map[string]any{"providerLeaseId": l.id, "metadata": map[string]any{"remoteCwd": l.remoteCwd}, "expiresAt": nil}
	p["command"] = e.command
	if e.args != nil {
		p["args"] = e.args
	}
	if e.cwd != nil {
		p["cwd"] = *e.cwd
	}
	if e.env != nil {
		p["env"] = e.env
	}
	if e.stdin != nil {
		p["stdin"] = *e.stdin
	}
	if e.timeoutMs > 0 {
		p["timeoutMs"] = e.timeoutMs
	}
	if e.bypass {
		p["bypassSession"] = true
	}
	return p
}

var invocationSeq atomic.Int64

func newInvocation() string { return fmt.Sprintf("inv-%d", invocationSeq.Add(1)) }

// execResult is a decoded environmentExecute result plus what execute.log
// delivered for it.
type execResult struct {
	ExitCode  *int
	TimedOut  bool
	Stdout    string
	Stderr    string
	StdoutSum *jsonstream.Text // when the host hashes results
	StderrSum *jsonstream.Text
	Metadata  map[string]any

	LogStdout, LogStderr string
	Log                  invocationLog
	Err                  map[string]any // the JSON-RPC error instead of a result
	invocation           string
}

func (h *host) start(l lease, e cmdSpec) (*pending, string) {
	h.t.Helper()
	inv := newInvocation()
	return h.call("environmentExecute", h.executeParams(l, e), inv), inv
}

func (h *host) execute(l lease, e cmdSpec) execResult {
	h.t.Helper()
	p, inv := h.start(l, e)
	return h.result(p, inv)
}

func (h *host) result(p *pending, inv string) execResult {
	h.t.Helper()
	return h.decode(p.wait(), inv)
}

func (h *host) decode(r reply, inv string) execResult {
	h.t.Helper()
	res := execResult{invocation: inv}
	res.LogStdout, res.LogStderr, res.Log = h.logs(inv)
	if r.Error != nil {
		res.Err = r.Error
		return res
	}
	m, ok := r.Result.(map[string]any)
	require.True(h.t, ok, "execute result is not an object: %v", r.Result)
	if n, ok := m["exitCode"].(json.Number); ok {
		v, err := strconv.Atoi(string(n))
		require.NoError(h.t, err)
		res.ExitCode = &v
	} else {
		require.Nil(h.t, m["exitCode"], "exitCode must be an integer or null")
	}
	res.TimedOut, ok = m["timedOut"].(bool)
	require.True(h.t, ok, "timedOut must be a boolean: %v", m["timedOut"])
	for _, f := range []struct {
		key string
		s   *string
		sum **jsonstream.Text
	}{{"stdout", &res.Stdout, &res.StdoutSum}, {"stderr", &res.Stderr, &res.StderrSum}} {
		switch v := m[f.key].(type) {
		case string:
			*f.s = v
		case jsonstream.Text:
			*f.sum = &v
		default:
			h.t.Fatalf("%s must be a string: %v", f.key, m[f.key])
		}
	}
	res.Metadata, _ = m["metadata"].(map[string]any)
	return res
}

// exit prints the exit code for messages and comparisons ("null" if none).
func (r execResult) exit() string {
	if r.ExitCode == nil {
		return "null"
	}
	return strconv.Itoa(*r.ExitCode)
}

// requireResult fails unless r is a result (not a JSON-RPC error).
func requireResult(t *testing.T, r execResult) {
	t.Helper()
	require.Nil(t, r.Err, "environmentExecute failed: %v", r.Err)
}

// assertStreamed checks that execute.log carried exactly the result's output.
func assertStreamed(t *testing.T, r execResult) {
	t.Helper()
	assert.Equal(t, r.Stdout, r.LogStdout, "execute.log stdout must equal the result's stdout")
	assert.Equal(t, r.Stderr, r.LogStderr, "execute.log stderr must equal the result's stderr")
	assert.Zero(t, r.Log.afterReply, "execute.log after the reply")
}

// ---- emulator checks ----

func requestCount(env *emulatorEnv, route string) int {
	return env.Server.Requests()[route]
}

const (
	routeCreateSession = "POST /toolbox/{sandboxId}/process/session"
	routeDeleteSession = "DELETE /toolbox/{sandboxId}/process/session/{sessionId}"
	routeSessionExec   = "POST /toolbox/{sandboxId}/process/session/{sessionId}/exec"
	routeCommandLogs   = "GET /toolbox/{sandboxId}/process/session/{sessionId}/command/{commandId}/logs"
	routeExecute       = "POST /toolbox/{sandboxId}/process/execute"
	routeStart         = "POST /api/sandbox/{idOrName}/start"
)

func sandboxView(t *testing.T, env *emulatorEnv, id string) emulator.SandboxView {
	t.Helper()
	v, ok := env.Server.Sandbox(id)
	require.True(t, ok, "sandbox %s does not exist", id)
	return v
}

// processesWith lists the host processes whose command line contains token
// (sandbox processes are real processes on this machine).
func processesWith(token string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(token)) {
			continue
		}
		// A zombie keeps its cmdline empty; a live one is what we look for.
		found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

func assertNoProcessWith(t *testing.T, tokens ...string) {
	t.Helper()
	var left []string
	ok := testutil.Eventually(5*time.Second, func() bool {
		left = nil
		for _, tok := range tokens {
			left = append(left, processesWith(tok)...)
		}
		return len(left) == 0
	})
	assert.True(t, ok, "processes still alive: %v", left)
}

// finish destroys the leases through the worker, shuts it down, and checks
// that the emulator holds no sandbox and runs no process any more.
func finish(t *testing.T, h *host, env *emulatorEnv, leases ...lease) {
	t.Helper()
	for _, l := range leases {
		h.destroy(l)
	}
	h.shutdown()
	if err := waitForNoSandboxes(env, 10*time.Second); err != nil {
		t.Error(err)
	}
	assert.True(t, testutil.Eventually(10*time.Second, func() bool { return env.Server.LiveProcesses() == 0 }),
		"%d emulator processes still alive", env.Server.LiveProcesses())
}

// uniqueSleep returns a sleep duration argument unique to this run, so the
// sleep process itself can be found (and found dead) in /proc.
func uniqueSleep(secs int) string {
	return fmt.Sprintf("%d.%07d", secs, rand.IntN(10_000_000))
}

// hexBytes decodes `od -An -v -tx1` output.
func hexBytes(t *testing.T, od string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(od), ""))
	require.NoError(t, err, "not od output: %q", od)
	return b
}

// splitNUL splits NUL-terminated fields.
func splitNUL(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	parts := strings.Split(string(b), "\x00")
	return parts[:len(parts)-1]
}

// ---- 1. streams and exit codes ----

func TestExecuteSeparatesStreamsAndReportsExitCodes(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{})
	l := h.acquire(leaseConfig(env, ""))

	// One lease, one session, run in order: a command that exits or dies
	// ends only itself, and the next command runs in the same session.
	steps := []struct {
		name           string
		script         string
		exit           int
		stdout, stderr string
		// notice is the job report the session's bash adds to stderr when
		// a command dies by a signal, as on a real Daytona daemon.
		notice string
	}{
		{"interleaved streams stay apart", `for i in 1 2 3; do echo out$i; echo err$i >&2; done`, 0,
			"out1\nout2\nout3\n", "err1\nerr2\nerr3\n", ""},
		{"exit 1 keeps its output", `echo partial; echo failing >&2; exit 1`, 1, "partial\n", "failing\n", ""},
		{"exit 3", `exit 3`, 3, "", "", ""},
		{"the session survived the exit", `echo still here`, 0, "still here\n", "", ""},
		{"SIGKILL is 137", `echo before; kill -KILL $$; echo after`, 137, "before\n", "", "Killed"},
		{"SIGTERM is 143", `echo before >&2; kill -TERM $$`, 143, "", "before\n", "Terminated"},
		{"the session survived the kills", `pwd >/dev/null && echo alive`, 0, "alive\n", "", ""},
		{"no output", `true`, 0, "", "", ""},
		{"unicode and separators", `printf 'ü日本🎉\n\342\200\250|\t|\r|\033[0m\n'; printf '%s\n' "\"'\\" >&2`, 0,
			"ü日本🎉\n\u2028|\t|\r|\x1b[0m\n", "\"'\\\n", ""},
		{"exit 255", `exit 255`, 255, "", "", ""},
	}
	for _, s := range steps {
		r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", s.script}})
		requireResult(t, r)
		assert.Equal(t, strconv.Itoa(s.exit), r.exit(), s.name)
		assert.False(t, r.TimedOut, s.name)
		assert.Equal(t, s.stdout, r.Stdout, s.name)
		if s.notice != "" {
			require.True(t, strings.HasPrefix(r.Stderr, s.stderr), "%s: stderr %q", s.name, r.Stderr)
			assert.Contains(t, r.Stderr[len(s.stderr):], s.notice, s.name)
		} else {
			assert.Equal(t, s.stderr, r.Stderr, s.name)
		}
		assertStreamed(t, r)
		assert.Contains(t, r.Metadata, "durationMs", s.name)
		assert.Equal(t, true, r.Metadata["cacheHit"], s.name)
	}
	assert.Equal(t, 1, requestCount(env, routeCreateSession), "every command ran in the one session")
	assert.Equal(t, 1, sandboxView(t, env, l.id).Sessions)
	finish(t, h, env, l)
}

// ---- 2. hostile values reach the command byte for byte ----

// hostileValues are strings a shell-quoting mistake would mangle.
var hostileValues = []string{
	"", " ", "  leading and trailing  ", "it's", `"double"`, `'"'"'`, "'", "''", `\`, `back\slash`,
	`trailing\`, `\\\\`, `\n is not a newline`, "$HOME", "${HOME}", "$(id)", "`id`", "$$", "$1", "$@", "!event",
	"*", "?", "[a]", "{a,b}", "~", "~root", "-n", "--", "-e", "a;b", "a|b", "a&b", "a>b", "a<b", "<>&",
	"#comment", "%s%d%%", "new\nline", "\n", "trailing newline\n", "cr\rlf\r\n", "tab\tsep",
	"\x01\x02\x1b[31m\x7f", "ü日本🎉", "\u2028\u2029", "\ufeffbom", "\u00a0nbsp", "=", "a=b", "\U0010FFFF",
	strings.Repeat("🎉'\"$", 500),
}

// odArgsScript prints its arguments NUL-terminated as od hex (the session's
// line labelling and JSON never see the raw bytes).
const odArgsScript = `printf '%s\0' "$@" | od -An -v -tx1`

func TestExecuteCarriesHostileValuesByteForByte(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"session", "one-shot"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bypass := mode == "one-shot"
			env := startEmulator(t, emulator.Options{})
			h := startHost(t, hostOptions{})
			l := h.acquire(leaseConfig(env, ""))
			run := func(e cmdSpec) execResult {
				t.Helper()
				e.bypass = bypass
				r := h.execute(l, e)
				requireResult(t, r)
				require.Equal(t, "0", r.exit(), "stdout %q stderr %q", r.Stdout, r.Stderr)
				if !bypass {
					assertStreamed(t, r)
				}
				return r
			}

			t.Run("args", func(t *testing.T) {
				r := run(cmdSpec{command: "sh", args: append([]string{"-c", odArgsScript, "sh"}, hostileValues...)})
				assert.Equal(t, hostileValues, splitNUL(hexBytes(t, r.Stdout)))
				// The command itself, not a shell, receives the args too.
				r = run(cmdSpec{command: "printf", args: append([]string{"[%s]\n"}, hostileValues...)})
				var want strings.Builder
				for _, v := range hostileValues {
					want.WriteString("[" + v + "]\n")
				}
				assert.Equal(t, want.String(), r.Stdout)
			})

			t.Run("env", func(t *testing.T) {
				vars := map[string]string{}
				script := `printf '%s\0'`
				var want []string
				for i, v := range hostileValues {
					k := fmt.Sprintf("HOSTILE_%d", i)
					vars[k] = v
					script += fmt.Sprintf(` "${%s+set}" "$%s"`, k, k)
					want = append(want, "set", v)
				}
				r := run(cmdSpec{command: "sh", args: []string{"-c", script + " | od -An -v -tx1"}, env: vars})
				assert.Equal(t, want, splitNUL(hexBytes(t, r.Stdout)))
			})

			t.Run("cwd", func(t *testing.T) {
				names := []string{"with space", "q'uote", `d"q`, "$HOME", "`x`", `back\slash`, "new\nline",
					"ü日本🎉", `'"'"'`, "-dash", "*", "~", "a;b&c|d"}
				var dirs []string
				for _, n := range names {
					dirs = append(dirs, l.remoteCwd+"/"+n)
				}
				run(cmdSpec{command: "mkdir", args: append([]string{"-p", "--"}, dirs...)})
				for _, d := range dirs {
					r := run(cmdSpec{command: "sh", args: []string{"-c", `printf '%s' "$PWD" | od -An -v -tx1`}, cwd: strp(d)})
					assert.Equal(t, d, string(hexBytes(t, r.Stdout)))
				}
			})

			t.Run("stdin", func(t *testing.T) {
				var all strings.Builder
				for b := 1; b < 128; b++ {
					all.WriteByte(byte(b))
				}
				rng := rand.New(rand.NewPCG(1, 2))
				big := make([]byte, 256<<10)
				for i := range big {
					big[i] = byte(' ' + rng.IntN(95))
				}
				for _, in := range []string{"", "x", "no trailing newline", "two\nlines\n", all.String(),
					"ü日本🎉\u2028", `'"'"'`, string(big)} {
					r := run(cmdSpec{command: "sh", args: []string{"-c", `od -An -v -tx1; echo @@; readlink /proc/$$/fd/0`}, stdin: strp(in)})
					dump, path, ok := strings.Cut(r.Stdout, "@@\n")
					require.True(t, ok, "stdout %.300q", r.Stdout)
					assert.Equal(t, in, string(hexBytes(t, dump)), "stdin of %d bytes", len(in))
					path = strings.TrimSuffix(path, "\n")
					assert.True(t, strings.HasPrefix(path, "/tmp/paperclip-stdin-"), "stdin came from %q", path)
					_, err := os.Stat(path)
					assert.True(t, errors.Is(err, os.ErrNotExist), "the stdin file %s is left behind (%v)", path, err)
				}
			})

			t.Run("generated", func(t *testing.T) {
				seed := uint64(time.Now().UnixNano())
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, seed>>7))
				rounds := 6
				if bypass {
					rounds = 2
				}
				for round := 0; round < rounds; round++ {
					values := make([]string, 30)
					vars := map[string]string{}
					script := `{ printf '%s\0' "$@"; printf '%s\0'`
					for i := range values {
						values[i] = generatedString(rng)
						k := fmt.Sprintf("GEN_%d", i)
						vars[k] = values[i]
						script += ` "$` + k + `"`
					}
					script += `; } | od -An -v -tx1`
					r := run(cmdSpec{command: "sh", args: append([]string{"-c", script, "sh"}, values...), env: vars})
					got := splitNUL(hexBytes(t, r.Stdout))
					want := append(append([]string(nil), values...), values...)
					if !assert.Equal(t, want, got, "seed %d round %d", seed, round) {
						return
					}
				}
			})

			if bypass {
				assert.Zero(t, requestCount(env, routeCreateSession), "one-shot commands open no session")
			}
			finish(t, h, env, l)
		})
	}
}

// generatedString returns valid UTF-8 without NUL (argv and environ cannot
// carry NUL), weighted towards what shells and JSON treat specially.
func generatedString(rng *rand.Rand) string {
	const special = "'\"$`\\!*?[]{}()|&;<>~#%^= \t\n\r"
	n := rng.IntN(40)
	var b strings.Builder
	for i := 0; i < n; i++ {
		var r rune
		switch k := rng.IntN(100); {
		case k < 30:
			r = rune(0x20 + rng.IntN(0x5f))
		case k < 50:
			r = rune(special[rng.IntN(len(special))])
		case k < 60:
			r = rune(1 + rng.IntN(0x1f)) // controls, not NUL
			if rng.IntN(4) == 0 {
				r = 0x7f
			}
		case k < 75:
			r = rune(0x80 + rng.IntN(0x800-0x80))
		case k < 90:
			for r = rune(0x800 + rng.IntN(0x10000-0x800)); r >= 0xD800 && r <= 0xDFFF; r = rune(0x800 + rng.IntN(0x10000-0x800)) {
			}
		default:
			r = rune(0x10000 + rng.IntN(0x110000-0x10000))
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ---- 3. timeouts ----

func randomToken(prefix string) string { return fmt.Sprintf("%s-%08x", prefix, rand.Uint32()) }

func TestExecuteTimeoutEndsTheCommand(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"session", "one-shot"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bypass := mode == "one-shot"
			env := startEmulator(t, emulator.Options{})
			h := startHost(t, hostOptions{})
			l := h.acquire(leaseConfig(env, ""))
			marker := filepath.Join(sandboxView(t, env, l.id).HomeDir, "touched-after-the-timeout")
			// $0 and the sleep's argument make the command's processes
			// findable in /proc.
			name, sleep := randomToken("timeout-victim"), uniqueSleep(6)
			script := `echo before; echo err-before >&2; sleep ` + sleep + `; touch "$1"`
			start := time.Now()
			r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", script, name, marker}, timeoutMs: 2500, bypass: bypass})
			requireResult(t, r)
			assert.Nil(t, r.ExitCode)
			assert.True(t, r.TimedOut)
			assert.Contains(t, r.Metadata, "durationMs")
			if bypass {
				// One-shot output is all or nothing; the message is the
				// daemon's, as the plugin reports it.
				assert.Equal(t, "", r.Stdout)
				assert.Equal(t, "request timeout: command execution timeout\n", r.Stderr)
				assert.Zero(t, r.Log.chunks, "one-shot commands stream nothing")
			} else {
				// The output printed before the timeout is kept, and was streamed.
				assert.Equal(t, "before\n", r.Stdout)
				assert.Equal(t, "err-before\nCommand timed out after 3 s.\n", r.Stderr)
				assert.Equal(t, "before\n", r.LogStdout)
				assert.Equal(t, "err-before\n", r.LogStderr, "the timeout notice is not part of the streamed output")
				assert.Zero(t, sandboxView(t, env, l.id).Sessions, "the timed-out command's session is gone")
				assert.Equal(t, 1, requestCount(env, routeDeleteSession))
			}
			assertNoProcessWith(t, name, sleep)
			// Left alive, the command would touch the marker about 6 s in.
			time.Sleep(time.Until(start.Add(7500 * time.Millisecond)))
			_, err := os.Stat(marker)
			assert.True(t, errors.Is(err, os.ErrNotExist), "the timed-out command ran on: %v", err)

			// The lease still works; in session mode a fresh session opens.
			r = h.execute(l, cmdSpec{command: "echo", args: []string{"again"}, bypass: bypass})
			requireResult(t, r)
			assert.Equal(t, "0", r.exit())
			assert.Equal(t, "again\n", r.Stdout)
			if bypass {
				assert.Zero(t, requestCount(env, routeCreateSession))
			} else {
				assert.Equal(t, 2, requestCount(env, routeCreateSession), "a fresh session after the timeout")

				// A command that keeps printing until the timeout: what it
				// printed is streamed and kept, nothing comes after the reply.
				r = h.execute(l, cmdSpec{command: "sh", args: []string{"-c", `while :; do echo tick; sleep 0.05; done`}, timeoutMs: 2000})
				requireResult(t, r)
				assert.True(t, r.TimedOut)
				assert.NotEmpty(t, r.Stdout)
				assert.Equal(t, "", strings.ReplaceAll(r.Stdout, "tick\n", ""))
				assert.Equal(t, "Command timed out after 2 s.\n", r.Stderr)
				assert.Equal(t, r.Stdout, r.LogStdout)
				time.Sleep(300 * time.Millisecond)
				_, _, lg := h.logs(r.invocation)
				assert.Zero(t, lg.afterReply, "execute.log after the reply")
			}
			finish(t, h, env, l)
		})
	}
}

// gitTimeoutMessage is the reference's notice for a git network command
// that ran out its timeout of secs seconds.
func gitTimeoutMessage(secs int) string {
	return fmt.Sprintf("Git network operation timed out after %d s — the remote may be unreachable or noninteractive credentials are not configured.\n", secs)
}

// TestExecuteCapsGitNetworkCommands runs a fake git (first on PATH, it
// prints and hangs) under a short timeout: the detection decides the wording.
// The cap itself is min(timeout, 120 s), so any timeout below 120 s shows the
// same number either way.
func TestExecuteCapsGitNetworkCommands(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{})
	hang := uniqueSleep(30)
	// installGit puts the fake git first on l's PATH.
	installGit := func(l lease) map[string]string {
		home := sandboxView(t, env, l.id).HomeDir
		r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", `mkdir -p "$HOME/bin" && cat >"$HOME/bin/git" && chmod +x "$HOME/bin/git"`},
			stdin: strp("#!/bin/sh\necho \"fake-git $*\"\nexec sleep " + hang + "\n")})
		requireResult(t, r)
		require.Equal(t, "0", r.exit(), r.Stderr)
		return map[string]string{"PATH": home + "/bin:" + os.Getenv("PATH")}
	}
	// The in-session commands run one after another within a lease, so
	// each gets a lease of its own: every command below waits out its
	// timeout at the same time, not in turn.
	l, l2 := h.acquire(leaseConfig(env, "")), h.acquire(leaseConfig(env, ""))
	path, path2 := installGit(l), installGit(l2)
	home := sandboxView(t, env, l.id).HomeDir

	tests := []struct {
		command string
		args    []string
		network bool
	}{
		{"git", []string{"fetch"}, true},
		{"git", []string{"push", "origin", "main"}, true},
		{"git", []string{"pull", "--rebase"}, true},
		{"git", []string{"ls-remote", "origin"}, true},
		{"git", []string{"clone", "https://example.invalid/r.git"}, true},
		{"git", []string{"-C", "repo", "fetch"}, true},
		{"git", []string{"-c", "http.proxy=x", "push"}, true},
		{"git", []string{"--git-dir", ".git", "--work-tree", ".", "pull"}, true},
		{"git", []string{"--no-pager", "fetch", "--all"}, true},
		{"git", []string{"remote", "update"}, true},
		{"git", []string{"remote", "-v", "update"}, true},
		{"git", []string{"submodule", "update", "--init"}, true},
		{"git", []string{"submodule", "--quiet", "update"}, true},
		{home + "/bin/git", []string{"fetch"}, true},
		{"git", []string{"status"}, false},
		{"git", []string{"log", "fetch"}, false},
		{"git", []string{"-C", "fetch", "status"}, false},
		{"git", []string{"--git-dir=.git", "status"}, false},
		{"git", []string{"remote", "-v"}, false},
		{"git", []string{"remote", "add", "origin", "x"}, false},
		{"git", []string{"submodule", "status"}, false},
		{"git", nil, false},
		{"sh", []string{"-c", "exec git fetch"}, false},
	}
	// In a session: the timeout is long enough for the fake git's first
	// line to arrive before it on a loaded machine.
	sessions := []struct {
		l    lease
		path map[string]string
		args []string
		want string
	}{
		{l, path, []string{"-C", ".", "fetch", "origin"}, gitTimeoutMessage(8)},
		{l2, path2, []string{"status"}, "Command timed out after 8 s.\n"},
	}
	// All at once: one-shot commands run side by side, and beside the
	// in-session ones. The one-shot timeout leaves the daemon's own 408
	// more time to arrive before the client's deadline (the timeout plus
	// 5 s) on a loaded machine, where two dozen commands start at once.
	var reqs []request
	var invs []string
	for _, tt := range tests {
		inv := newInvocation()
		invs = append(invs, inv)
		reqs = append(reqs, request{method: "environmentExecute", invocation: inv,
			params: h.executeParams(l, cmdSpec{command: tt.command, args: tt.args, env: path, timeoutMs: 4000, bypass: true})})
	}
	for _, tt := range sessions {
		inv := newInvocation()
		invs = append(invs, inv)
		reqs = append(reqs, request{method: "environmentExecute", invocation: inv,
			params: h.executeParams(tt.l, cmdSpec{command: "git", args: tt.args, env: tt.path, timeoutMs: 8000})})
	}
	pending := h.send(reqs...)
	t.Run("one-shot", func(t *testing.T) {
		for i, tt := range tests {
			r := h.result(pending[i], invs[i])
			requireResult(t, r)
			assert.True(t, r.TimedOut, "%s %v", tt.command, tt.args)
			want := "request timeout: command execution timeout\n"
			if tt.network {
				want = gitTimeoutMessage(4)
			} else if strings.HasPrefix(r.Stderr, "HTTP request timed out after 9000ms waiting for a response.") {
				// On a loaded machine the request's own deadline (the
				// timeout plus 5 s) can pass before the daemon's 408
				// arrives; the reference then reports the SDK's message.
				want = r.Stderr
			}
			assert.Equal(t, want, r.Stderr, "%s %v", tt.command, tt.args)
		}
	})
	t.Run("session", func(t *testing.T) {
		for i, tt := range sessions {
			r := h.result(pending[len(tests)+i], invs[len(tests)+i])
			requireResult(t, r)
			assert.True(t, r.TimedOut)
			assert.Equal(t, "fake-git "+strings.Join(tt.args, " ")+"\n", r.Stdout, "the fake git ran")
			assert.Equal(t, tt.want, r.Stderr, "git %v", tt.args)
		}
	})
	assertNoProcessWith(t, hang)
	finish(t, h, env, l, l2)
}

// ---- 4. bypassSession ----

func TestExecuteBypassSessionOpensNoSession(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{})
	l := h.acquire(leaseConfig(env, ""))
	before, executes := requestCount(env, routeCreateSession), requestCount(env, routeExecute)
	for _, tt := range []struct {
		script string
		exit   int
		stdout string
	}{
		// stdout and stderr arrive combined, in the order written.
		{`echo a; echo b >&2; echo c; exit 4`, 4, "a\nb\nc\n"},
		{`printf 'no newline'`, 0, "no newline"},
		{`echo only-stderr >&2`, 0, "only-stderr\n"},
		{`true`, 0, ""},
	} {
		r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", tt.script}, bypass: true})
		requireResult(t, r)
		assert.Equal(t, strconv.Itoa(tt.exit), r.exit(), tt.script)
		assert.False(t, r.TimedOut)
		assert.Equal(t, tt.stdout, r.Stdout, tt.script)
		assert.Equal(t, "", r.Stderr, tt.script)
		assert.Zero(t, r.Log.chunks, "a one-shot command streams nothing")
		assert.Contains(t, r.Metadata, "durationMs")
	}
	assert.Equal(t, before, requestCount(env, routeCreateSession), "bypassSession opened a session")
	assert.Zero(t, requestCount(env, routeSessionExec))
	assert.Equal(t, executes+4, requestCount(env, routeExecute))
	assert.Zero(t, sandboxView(t, env, l.id).Sessions)

	// The first in-session command opens the session then.
	r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", "echo a; echo b >&2"}})
	requireResult(t, r)
	assert.Equal(t, "a\n", r.Stdout)
	assert.Equal(t, "b\n", r.Stderr)
	assert.Equal(t, before+1, requestCount(env, routeCreateSession))
	assert.Equal(t, 1, sandboxView(t, env, l.id).Sessions)
	finish(t, h, env, l)
}

// ---- 5. a log stream dropped mid-command ----

func TestExecuteSurvivesDroppedLogStreams(t *testing.T) {
	t.Parallel()
	// Numbered lines on both streams, with a pause so that drops land while
	// the command still runs: a duplicate or a gap shows at once.
	const script = `i=1; while [ $i -le 800 ]; do echo "out $i"; echo "err $i" >&2; ` +
		`if [ $i -eq 400 ]; then sleep 0.5; fi; i=$((i+1)); done`
	var wantOut, wantErr strings.Builder
	for i := 1; i <= 800; i++ {
		fmt.Fprintf(&wantOut, "out %d\n", i)
		fmt.Fprintf(&wantErr, "err %d\n", i)
	}
	tests := []struct {
		name      string
		dropAfter int
		times     int // 0: every connection drops
		split     emulator.FrameSplitter
		minLogs   int // GET …/logs requests at least (WebSockets and snapshots)
	}{
		{name: "reconnects mid-line", dropAfter: 4097, times: 1, minLogs: 2},
		{name: "reconnects inside the first marker", dropAfter: 1, times: 1, minLogs: 2},
		{name: "reconnects with random frames", dropAfter: 10007, times: 1, split: emulator.SplitRandom(7, 700), minLogs: 2},
		{name: "reconnects after the pause", dropAfter: 12000, times: 1, minLogs: 2},
		{name: "falls back to polling when every stream drops", dropAfter: 2000, times: 0, minLogs: 3},
		{name: "falls back to polling after the reconnect drops too", dropAfter: 3000, times: 2, minLogs: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := startEmulator(t, emulator.Options{LogFrameSplit: tt.split})
			h := startHost(t, hostOptions{})
			l := h.acquire(leaseConfig(env, ""))
			env.Server.AddFault(emulator.Fault{Path: `/logs$`, DropWebSocketAfterBytes: tt.dropAfter, Times: tt.times})
			r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", script}})
			requireResult(t, r)
			assert.Equal(t, "0", r.exit())
			assert.Equal(t, wantOut.String(), r.Stdout)
			assert.Equal(t, wantErr.String(), r.Stderr)
			assertStreamed(t, r)
			assert.GreaterOrEqual(t, requestCount(env, routeCommandLogs), tt.minLogs)
			if tt.times > 0 {
				assert.Empty(t, env.Server.Faults(), "the drop fault was never hit")
			}
			env.Server.ClearFaults()
			finish(t, h, env, l)
		})
	}
}

// ---- 6. a command that prints a lot ----

// bigOutputLines is how many 1000-byte lines TestExecuteRelaysLargeOutput
// prints: 100 MB in make test-long and without the race detector, less in
// make test and under -short (the full size stays in BenchmarkExecuteRelay).
func bigOutputLines() int {
	if n, err := strconv.Atoi(os.Getenv("DAYTONA_WORKER_TEST_BIG_LINES")); err == nil && n > 0 {
		return n
	}
	switch {
	case testutil.Long():
		return 100_000
	case testing.Short():
		return 8_000
	case raceEnabled:
		return 10_000
	}
	return 100_000
}

// bigOutputScript prints n numbered lines of exactly 1000 bytes.
func bigOutputScript(n int) string {
	return fmt.Sprintf(`awk 'BEGIN { pad = sprintf("%%989s", ""); gsub(/ /, "a", pad); `+
		`for (i = 1; i <= %d; i++) printf "%%09d %%s\n", i, pad }'; echo done >&2`, n)
}

// bigOutputSum is the digest of bigOutputScript's stdout, computed here.
func bigOutputSum(n int) (sum uint64, size int64) {
	h := newDigest()
	line := []byte(fmt.Sprintf("%09d %s\n", 0, strings.Repeat("a", 989)))
	for i := 1; i <= n; i++ {
		copy(line, fmt.Sprintf("%09d", i))
		h.Write(line)
	}
	return h.Sum64(), int64(n) * 1000
}

func TestExecuteRelaysLargeOutput(t *testing.T) {
	t.Parallel()
	n := bigOutputLines()
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{hashResults: true})
	l := h.acquire(leaseConfig(env, ""))
	start := time.Now()
	r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", bigOutputScript(n)}})
	elapsed := time.Since(start)
	requireResult(t, r)
	assert.Equal(t, "0", r.exit())
	wantSum, wantSize := bigOutputSum(n)
	require.NotNil(t, r.StdoutSum)
	assert.Equal(t, wantSize, r.StdoutSum.N, "result stdout size")
	assert.Equal(t, wantSum, r.StdoutSum.Sum, "result stdout content (starts %q)", r.StdoutSum.Head)
	assert.Equal(t, wantSize, r.Log.outHash.n, "execute.log stdout size")
	assert.Equal(t, wantSum, r.Log.outHash.sum(), "execute.log stdout content")
	require.NotNil(t, r.StderrSum)
	assert.Equal(t, digestOf([]byte("done\n")), r.StderrSum.Sum, "result stderr")
	assert.Equal(t, digestOf([]byte("done\n")), r.Log.errHash.sum(), "execute.log stderr")
	assert.Zero(t, r.Log.afterReply)
	t.Logf("%d MB relayed in %s (%d execute.log notifications, largest %d units)", wantSize/1e6, elapsed, r.Log.chunks, r.Log.maxChunkUnits)
	finish(t, h, env, l)
}

// TestExecuteResultFitsTheHostsLineLimit: the host drops a line longer than
// its limit unread (and the call then only ends with its timeout), so a
// result that would be longer carries the start and the end of the output,
// with a note between them; execute.log still streams all of it.
func TestExecuteResultFitsTheHostsLineLimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	env := startEmulator(t, emulator.Options{})
	// As a host whose limit was lowered starts it: without flags.
	p := startWorker(t, []string{"DAYTONA_WORKER_MAX_MESSAGE_CHARS=" + strconv.Itoa(limit)})
	h := newHost(t, p, p.Stdout(), hostOptions{meterLines: true})
	l := h.acquire(leaseConfig(env, ""))
	const lines = 20000 // about 190 KB
	script := `i=0; while [ $i -lt ` + strconv.Itoa(lines) + ` ]; do echo "line $i"; i=$((i+1)); done >&%d; echo done >&%d`
	var full strings.Builder
	for i := range lines {
		fmt.Fprintf(&full, "line %d\n", i)
	}
	tests := []struct {
		name       string
		spec       cmdSpec
		cutStream  string // the stream that is too long
		streamed   bool   // execute.log carries the whole output
		otherWhole string // the other stream, kept whole
	}{
		{name: "session stdout", spec: cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf(script, 1, 2)}}, cutStream: "stdout", streamed: true, otherWhole: "done\n"},
		{name: "session stderr", spec: cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf(script, 2, 1)}}, cutStream: "stderr", streamed: true, otherWhole: "done\n"},
		// One-shot output is combined in stdout, as Daytona returns it.
		{name: "one-shot", spec: cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf(script, 1, 1)}, bypass: true}, cutStream: "stdout", otherWhole: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.execute(l, tt.spec)
			requireResult(t, r)
			assert.Equal(t, "0", r.exit())
			got, other := r.Stdout, r.Stderr
			if tt.cutStream == "stderr" {
				got, other = r.Stderr, r.Stdout
			}
			want := full.String()
			if tt.spec.bypass {
				want += "done\n"
			}
			assert.Equal(t, tt.otherWhole, other, "the other stream is whole")
			head, tail, found := strings.Cut(got, "[daytona-worker: ")
			require.True(t, found, "a note says what was left out")
			note, tail, _ := strings.Cut(tail, "]\n")
			assert.True(t, strings.HasPrefix(want, head) && strings.HasSuffix(head, "\n"), "the start is the output's, cut after a line")
			assert.True(t, strings.HasSuffix(want, tail) && strings.HasPrefix(tail, "line "), "the end is the output's, cut before a line: %.40q", tail)
			omitted := len(want) - len(head) - len(tail)
			assert.Equal(t, fmt.Sprintf("%d bytes of %s left out here, so that the result stays within the %d characters the Paperclip host reads in one message", omitted, tt.cutStream, limit), note)
			assert.Greater(t, len(head)+len(tail), limit/2, "most of the room is used")
			if tt.streamed {
				streamed := r.LogStdout
				if tt.cutStream == "stderr" {
					streamed = r.LogStderr
				}
				assert.Equal(t, want, streamed, "execute.log carries the whole output")
			}
		})
	}
	// A command whose output fits is untouched.
	r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", "echo small"}})
	requireResult(t, r)
	assert.Equal(t, "small\n", r.Stdout)
	finish(t, h, env, l)
	assert.LessOrEqual(t, h.meter.longest.Load(), int64(limit), "no line the worker wrote is longer than the host reads")
	assert.Contains(t, p.Stderr(), "an execute result is cut to the start and the end of its output")
}

// TestExecuteHoldsLittleOfAnOutputPastTheHostsLimit: the result of a
// command that prints far more than the host reads in one message carries
// only the start and the end of it, so the worker drops the middle once
// execute.log has carried it instead of holding it all until the end.
func TestExecuteHoldsLittleOfAnOutputPastTheHostsLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	env := startEmulator(t, emulator.Options{})
	p := startWorker(t, []string{"DAYTONA_WORKER_MAX_MESSAGE_CHARS=" + strconv.Itoa(limit)})
	h := newHost(t, p, p.Stdout(), hostOptions{hashResults: true, meterLines: true})
	l := h.acquire(leaseConfig(env, ""))
	line := "a line of output that a runaway loop prints again and again and again and again and again\n"
	// Enough to drop a middle in make test; in make test-long (run without
	// the race detector) enough that holding it all would show in the RSS.
	total := 24_000_000
	if testutil.Long() {
		total = 96_000_000
	}
	size := len(line) * (total / len(line)) // whole lines
	_, before := workerMemory(t, p)
	r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf("yes '%s' | head -c %d", strings.TrimSuffix(line, "\n"), size)}})
	peak, _ := workerMemory(t, p)
	requireResult(t, r)
	assert.Equal(t, "0", r.exit())
	full := strings.Repeat(line, size/len(line))
	assert.Equal(t, int64(size), r.Log.outHash.n, "execute.log carried all of it")
	assert.Equal(t, digestOf([]byte(full)), r.Log.outHash.sum())
	require.NotNil(t, r.StdoutSum)
	assert.Less(t, r.StdoutSum.N, int64(limit), "the result carries a part")
	assert.True(t, strings.HasPrefix(full, r.StdoutSum.Head), "the result starts as the output does: %.60q", r.StdoutSum.Head)
	t.Logf("worker RSS %.1f MiB before, peak %.1f MiB for %d MB of output", before, peak, size/1_000_000)
	if !raceEnabled && testutil.Long() {
		// (The race detector's shadow memory grows with what is touched;
		// make test-long runs this without it.)
		assert.Less(t, peak-before, 56.0, "the worker held the whole output")
	}
	assert.LessOrEqual(t, h.meter.longest.Load(), int64(limit))
	finish(t, h, env, l)
}

// TestExecuteStreamsNoMoreThanTheHostTakes: the host takes 128 Mi
// characters of one execute's output in execute.log and drops (after
// parsing) every chunk past that; the worker sends none of those.
func TestExecuteStreamsNoMoreThanTheHostTakes(t *testing.T) {
	if !testutil.Long() {
		t.Skip("relays 140 MB: make test-long runs it")
	}
	t.Parallel()
	const hostCap = 128 << 20
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{hashResults: true})
	l := h.acquire(leaseConfig(env, ""))
	// 1 to 1,400,000, zero-padded to 99 digits a line: 140 MB in which every
	// 100 bytes occur once, so that each chunk the host got can be found.
	const lines = 1_400_000
	full := make([]byte, 0, lines*100)
	for i := 1; i <= lines; i++ {
		full = fmt.Appendf(full, "%099d\n", i)
	}
	r := h.execute(l, cmdSpec{command: "seq", args: []string{"-f", "%099.0f", "1", strconv.Itoa(lines)}})
	requireResult(t, r)
	assert.Equal(t, "0", r.exit())
	streamed := r.Log.outHash.n // ASCII: a character a byte
	assert.LessOrEqual(t, streamed, int64(hostCap), "nothing past what the host takes")
	assert.Greater(t, streamed, int64(hostCap-maxChunkBytes), "all the host takes")
	// The host's rule: a chunk that would pass the sum is dropped and a
	// smaller one later may fit. So the chunks are pieces of the output in
	// order, contiguous until the first one dropped, and a gap only where
	// what was sent and what was left out together pass the bound.
	var end, sent int
	for i, p := range r.Log.outPieces {
		at := bytes.Index(full[end:], []byte(p.head))
		if !assert.GreaterOrEqual(t, at, 0, "chunk %d is a piece of the output after the one before", i) {
			break
		}
		at += end
		if at > end {
			assert.Greater(t, sent+(at-end), hostCap, "chunk %d: a gap only when the chunk left out would pass the host's bound", i)
		}
		if !assert.Equal(t, digestOf(full[at:at+p.n]), p.sum, "chunk %d is the output at %d", i, at) {
			break
		}
		end, sent = at+p.n, sent+p.n
	}
	require.NotNil(t, r.StdoutSum)
	assert.Less(t, r.StdoutSum.N, int64(len(full)), "the result is cut to the host's line")
	finish(t, h, env, l)
}

// maxChunkBytes is the largest execute.log chunk the worker sends.
const maxChunkBytes = 512 << 10

// ---- 7. many executes at once ----

func TestExecuteFiftyAtOnceOnFiveLeases(t *testing.T) {
	t.Parallel()
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		testExecuteFiftyAtOnce(t)
	})
	// Every Daytona request waits for the one slot; the commands' log
	// streams hold none, so all of them complete, exactly.
	t.Run("one request at a time", func(t *testing.T) {
		t.Parallel()
		testExecuteFiftyAtOnce(t, "--max-requests-per-host", "1")
	})
}

func testExecuteFiftyAtOnce(t *testing.T, args ...string) {
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{args: args})
	var leases []lease
	for i := 0; i < 5; i++ {
		leases = append(leases, h.acquire(leaseConfig(env, "")))
	}
	type sent struct {
		token string
		lease lease
		inv   string
		p     *pending
	}
	var reqs []request
	var all []sent
	for i := 0; i < 50; i++ {
		s := sent{token: fmt.Sprintf("tok-%02d-%08x", i, rand.Uint32()), lease: leases[i%5], inv: newInvocation()}
		// Output on both streams, spread over time, so that streams of
		// different commands interleave on the worker's stdout.
		script := `echo "$1 out 1"; echo "$1 err 1" >&2; sleep 0.0$2; echo "$1 out 2"; echo "$1 err 2" >&2`
		reqs = append(reqs, request{method: "environmentExecute", invocation: s.inv,
			params: h.executeParams(s.lease, cmdSpec{command: "sh", args: []string{"-c", script, "sh", s.token, strconv.Itoa(1 + i%9)}})})
		all = append(all, s)
	}
	for i, p := range h.send(reqs...) {
		all[i].p = p
	}
	for _, s := range all {
		r := h.result(s.p, s.inv)
		requireResult(t, r)
		assert.Equal(t, "0", r.exit(), s.token)
		assert.Equal(t, s.token+" out 1\n"+s.token+" out 2\n", r.Stdout, "reply to %s", s.token)
		assert.Equal(t, s.token+" err 1\n"+s.token+" err 2\n", r.Stderr, "reply to %s", s.token)
		assertStreamed(t, r)
	}
	// One session per lease, even though ten commands wanted it at once.
	assert.Equal(t, 5, requestCount(env, routeCreateSession))
	assert.Equal(t, 50, requestCount(env, routeSessionExec))
	finish(t, h, env, leases...)
}

// ---- 8. a sandbox stopped behind the worker's back ----

// The third way back, a cached handle gone stale during an idle spell, needs
// the worker's clock moved: TestExecuteRefreshesAStaleHandle in worker/ runs
// it in process against the same emulator.
func TestExecuteRestartsAStoppedSandbox(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"resume", "fresh-handle"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			env := startEmulator(t, emulator.Options{})
			h := startHost(t, hostOptions{})
			l := h.acquire(leaseConfig(env, `,"autoStopInterval":1,"reuseLease":true`))
			r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", `echo one > first; cat first`}})
			requireResult(t, r)
			require.Equal(t, "one\n", r.Stdout)

			require.NoError(t, env.Server.StopBehindClientsBack(l.id))
			require.Equal(t, "stopped", sandboxView(t, env, l.id).State)
			switch how {
			case "resume":
				// A new run resumes the lease first.
				p := baseParams(l.cfg)
				p["providerLeaseId"] = l.id
				p["leaseMetadata"] = map[string]any{}
				res := h.call("environmentResumeLease", p, "").wait()
				require.Nil(t, res.Error, "resume: %v", res.Error)
			case "fresh-handle":
				// The next command comes at once: the cached handle still
				// says "started". Daytona refuses the dispatch (400); the
				// worker then reads the real state, starts the sandbox and
				// dispatches once more (the plugin fails here).
			}
			execs := requestCount(env, routeSessionExec)

			r = h.execute(l, cmdSpec{command: "sh", args: []string{"-c", `echo two; cat first`}})
			requireResult(t, r)
			assert.Equal(t, "0", r.exit())
			assert.Equal(t, "two\none\n", r.Stdout, "the sandbox came back with its files")
			assert.Equal(t, "", r.Stderr)
			assertStreamed(t, r)
			assert.Equal(t, "started", sandboxView(t, env, l.id).State)
			assert.Equal(t, 1, requestCount(env, routeStart))
			assert.Equal(t, 2, requestCount(env, routeCreateSession), "a fresh session after the restart")
			if how == "fresh-handle" {
				assert.Equal(t, execs+2, requestCount(env, routeSessionExec), "one refused dispatch, then the real one")
			} else {
				assert.Equal(t, execs+1, requestCount(env, routeSessionExec), "the stale session was never tried")
			}
			finish(t, h, env, l)
		})
	}
}

// ---- 9. release while a command runs ----

// waitForLog waits until execute.log of inv has delivered want on stdout.
func (h *host) waitForLog(inv, want string) {
	h.t.Helper()
	ok := testutil.Eventually(30*time.Second, func() bool {
		out, _, _ := h.logs(inv)
		return strings.Contains(out, want)
	})
	require.True(h.t, ok, "execute.log of %s never showed %q", inv, want)
}

func TestExecuteReleaseWithCancelActiveWorkStopsTheCommand(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{})
	l := h.acquire(leaseConfig(env, ""))
	marker := filepath.Join(sandboxView(t, env, l.id).HomeDir, "touched-after-the-release")
	name, sleep := randomToken("cancelled"), uniqueSleep(60)
	p, inv := h.start(l, cmdSpec{command: "sh", args: []string{"-c", `echo started; sleep ` + sleep + `; touch "$1"`, name, marker}})
	h.waitForLog(inv, "started\n")

	start := time.Now()
	rel := h.call("environmentReleaseLease", h.releaseParams(l, map[string]any{"cancelActiveWork": true}), "").wait()
	took := time.Since(start)
	require.Nil(t, rel.Error, "release: %v", rel.Error)
	assert.Equal(t, map[string]any{"providerLeaseId": l.id, "state": "stopped"}, rel.Result)
	// It did not wait for the command (which had a minute to go).
	assert.Less(t, took, 30*time.Second)
	t.Logf("release answered after %s", took)

	// The execute ends too; what it answers is recorded and must be sane:
	// an error naming the problem, or a result that does not claim success.
	r := h.decode(p.waitFor(30*time.Second), inv)
	if r.Err != nil {
		t.Logf("the cancelled execute failed: %v", r.Err)
		assert.NotEmpty(t, r.Err["message"])
	} else {
		t.Logf("the cancelled execute returned exit %s, timedOut %v, stdout %q, stderr %q", r.exit(), r.TimedOut, r.Stdout, r.Stderr)
		assert.NotEqual(t, "0", r.exit(), "a cancelled command must not report success")
		assert.True(t, strings.HasPrefix(r.Stdout, "started\n"))
	}
	assert.Equal(t, "started\n", r.LogStdout)

	v := sandboxView(t, env, l.id)
	assert.Equal(t, "stopped", v.State)
	assert.Zero(t, v.Sessions)
	// The emulator's stop waits a bounded time for killed processes to go.
	assert.True(t, testutil.Eventually(10*time.Second, func() bool { return sandboxView(t, env, l.id).Processes == 0 }),
		"processes of the stopped sandbox")
	assertNoProcessWith(t, name, sleep)
	_, err := os.Stat(marker)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the cancelled command ran on: %v", err)
	finish(t, h, env, l)
}

func TestExecuteGracefulReleaseWaitsForTheCommand(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{})
	// The release waits for the command up to the liveness bound, at most
	// 10 s: the most room a loaded machine can get (at 5 s, the usual test
	// bound, the release went on while the command still ran).
	l := h.acquire(json.RawMessage(fmt.Sprintf(`{"apiKey":%q,"apiUrl":%q,"timeoutMs":60000,"livenessTimeoutMs":10000}`, env.APIKey, env.APIURL)))
	p, inv := h.start(l, cmdSpec{command: "sh", args: []string{"-c", `echo started; sleep 1; echo finished; echo bye >&2`}})
	h.waitForLog(inv, "started\n")
	rel := h.call("environmentReleaseLease", h.releaseParams(l, nil), "")

	r := h.result(p, inv)
	requireResult(t, r)
	assert.Equal(t, "0", r.exit())
	assert.Equal(t, "started\nfinished\n", r.Stdout, "the command ran to its end")
	assert.Equal(t, "bye\n", r.Stderr)
	assertStreamed(t, r)

	res := rel.wait()
	require.Nil(t, res.Error, "release: %v", res.Error)
	assert.Equal(t, map[string]any{"providerLeaseId": l.id, "state": "destroyed"}, res.Result)
	assert.False(t, res.At.Before(h.replyTime(p)), "the release answered before the command it waits for")
	if err := waitForNoSandboxes(env, 10*time.Second); err != nil {
		t.Error(err)
	}
	// The lease is closed now: a late command is refused.
	late := h.execute(l, cmdSpec{command: "true"})
	require.NotNil(t, late.Err)
	assert.Equal(t, "Daytona sandbox lease "+l.id+" is no longer active.", late.Err["message"])
	finish(t, h, env)
}

// TestExecuteReplacesInvalidUTF8AsNodeDecodes cuts the log stream into
// one-byte frames so that multi-byte and invalid sequences straddle every
// kind of boundary (frames, relay batches, chunks, output blocks): the
// result and the joined execute.log must both read as the plugin's Node
// decodes the whole output (each maximal subpart of an ill-formed sequence
// one U+FFFD, valid runes intact).
func TestExecuteReplacesInvalidUTF8AsNodeDecodes(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{LogFrameSplit: emulator.SplitEvery(1)})
	h := startHost(t, hostOptions{})
	l := h.acquire(leaseConfig(env, ""))
	line := "a\xe6\x97\xe2\x80\xa9b\xf0\x9f\x99\x82c\xff\xc3\xa9\xc3\n"
	// What Node 20's new TextDecoder().decode(line) gives.
	decoded := "a\ufffd\u2029b🙂c\ufffdé\ufffd\n"
	// printf's %b turns the octal escapes back into bytes.
	var octal strings.Builder
	for _, c := range []byte(line) {
		fmt.Fprintf(&octal, "\\%03o", c)
	}
	script := fmt.Sprintf(`i=0; while [ $i -lt 400 ]; do printf '%%b' '%s'; printf '%%b' '%s' >&2; i=$((i+1)); done`, octal.String(), octal.String())
	r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", script}})
	requireResult(t, r)
	require.Equal(t, "0", r.exit())
	want := strings.Repeat(decoded, 400)
	assert.Equal(t, want, r.Stdout)
	assert.Equal(t, want, r.Stderr)
	assertStreamed(t, r)
	finish(t, h, env, l)
}
