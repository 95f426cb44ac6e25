package main

import (
	"context"
	"fmt"
	"hash"
	"hash/maphash"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/internal/jsonstream"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
)

// host drives one worker process as Paperclip's host does (on a
// workerhost.Conn): execute.log notifications are digested per invocation,
// and result outputs as they stream by, so a 100 MB result costs the host no
// memory.
type host struct {
	p    *workerhost.Process
	conn *workerhost.Conn
	pid  int
	seed maphash.Seed

	mu   sync.Mutex
	logs map[string]*streamLog
}

type reply = workerhost.Reply

// streamLog is what execute.log delivered for one invocation.
type streamLog struct {
	stdout, stderr digest
	chunks         int
}

// digest accumulates a stream's bytes into a keyed hash.
type digest struct {
	h *maphash.Hash
	n int64
}

func (d *digest) write(seed maphash.Seed, p []byte) {
	if d.h == nil {
		d.h = &maphash.Hash{}
		d.h.SetSeed(seed)
	}
	_, _ = d.h.Write(p)
	d.n += int64(len(p))
}

func (d *digest) sum(seed maphash.Seed) uint64 {
	if d.h == nil {
		return maphash.String(seed, "")
	}
	return d.h.Sum64()
}

// startHost starts argv with a minimal environment, as the host's worker
// manager does (the Node worker needs HOME too).
func startHost(argv []string, seed maphash.Seed) (*host, error) {
	p, err := workerhost.Start(context.Background(), workerhost.Command{Path: argv[0], Args: argv[1:], Env: []string{"HOME=" + os.Getenv("HOME")}})
	if err != nil {
		return nil, err
	}
	h := &host{p: p, pid: p.Pid(), seed: seed, logs: map[string]*streamLog{}}
	h.conn = workerhost.NewConn(p, p.Stdout(), workerhost.Options{
		Notify: h.notify,
		NewDigest: func() hash.Hash64 {
			d := &maphash.Hash{}
			d.SetSeed(seed)
			return d
		},
		Hash: func(p []string) bool {
			return len(p) == 2 && p[0] == "result" && (p[1] == "stdout" || p[1] == "stderr")
		},
		// Output chunks are digested as they come, from the reader's memory.
		Raw: func(p []string) bool { return len(p) == 2 && p[0] == "params" && p[1] == "chunk" },
	})
	return h, nil
}

// initialize sends the host's initialize and waits for the reply.
func (h *host) initialize() (time.Time, error) {
	r, err := h.call("initialize", map[string]any{
		"manifest": map[string]any{"id": "paperclip.daytona-sandbox-provider", "apiVersion": 1, "version": "0.1.8"},
		"config":   map[string]any{}, "instanceInfo": map[string]any{"instanceId": "bench", "hostVersion": "1"},
		"apiVersion": 1, "databaseNamespace": nil,
	}, "", time.Minute)
	if err != nil {
		return time.Time{}, err
	}
	if r.Error != nil {
		return time.Time{}, fmt.Errorf("initialize: %v", r.Error)
	}
	return r.At, nil
}

func (h *host) notify(m workerhost.Message) {
	if m.Method() != "execute.log" {
		return
	}
	params := m.Params()
	chunk, _ := params["chunk"].(jsonstream.Bytes)
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.logs[m.Invocation()]
	if l == nil {
		l = &streamLog{}
		h.logs[m.Invocation()] = l
	}
	l.chunks++
	switch params["stream"] {
	case "stdout":
		l.stdout.write(h.seed, chunk)
	case "stderr":
		l.stderr.write(h.seed, chunk)
	}
}

// request is one host request to send.
type request struct {
	method     string
	params     any
	invocation string
}

// send writes the requests in one write (as a busy host does).
func (h *host) send(reqs ...request) ([]*workerhost.Call, error) {
	wire := make([]workerhost.Request, len(reqs))
	for i, r := range reqs {
		wire[i] = workerhost.Request{Method: r.method, Params: r.params}
		if r.invocation != "" {
			wire[i].Members = map[string]any{"paperclipInvocation": map[string]any{"id": r.invocation, "scope": map[string]any{"companyId": "c-bench"}}}
		}
	}
	return h.conn.Send(wire...)
}

// wait returns the reply to c, or an error after d or when the worker
// closed its stdout.
func (h *host) wait(c *workerhost.Call, d time.Duration) (reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r, err := c.Wait(ctx)
	if err != nil {
		return reply{}, fmt.Errorf("%w (stderr %q)", err, tail(h.p.Stderr(), 4096))
	}
	return r, nil
}

func (h *host) call(method string, params any, invocation string, d time.Duration) (reply, error) {
	calls, err := h.send(request{method: method, params: params, invocation: invocation})
	if err != nil {
		return reply{}, err
	}
	return h.wait(calls[0], d)
}

// streamed returns what execute.log delivered for an invocation.
func (h *host) streamed(invocation string) streamLog {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.logs[invocation]; l != nil {
		return *l
	}
	return streamLog{}
}

// stop asks the worker to shut down, then ends it.
func (h *host) stop() {
	_, _ = h.call("shutdown", map[string]any{}, "", 30*time.Second)
	h.hangUp()
}

// hangUp closes the worker's stdin, waits a while for it to exit, then ends
// it.
func (h *host) hangUp() {
	_ = h.p.CloseStdin()
	select {
	case <-h.conn.Done():
	case <-time.After(10 * time.Second):
	}
	_ = h.p.Close()
}

// tail is the end of s, at most n bytes, for messages.
func tail(s string, n int) string {
	return strings.TrimSpace(s[max(0, len(s)-n):])
}
