package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/maphash"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paperclipai/daytona-worker/internal/jsonstream"
)

// host drives one worker process as Paperclip's host does: requests with
// ids and invocations, replies routed back by id, execute.log notifications
// digested per invocation. Result outputs are digested as they stream by,
// so a 100 MB result costs the host no memory.
type host struct {
	cmd   *exec.Cmd
	pid   int
	stdin io.WriteCloser
	seed  maphash.Seed

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  int
	waiting map[string]chan reply
	logs    map[string]*streamLog
	readErr error
	done    chan struct{}
	stderr  *tailBuffer
}

// reply is a decoded reply and when it arrived.
type reply struct {
	result any
	err    map[string]any
	at     time.Time
}

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
// manager does, and initializes it.
func startHost(argv []string, seed maphash.Seed) (*host, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TZ=UTC"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	h := &host{cmd: cmd, stdin: stdin, seed: seed, waiting: map[string]chan reply{},
		logs: map[string]*streamLog{}, done: make(chan struct{}), stderr: &tailBuffer{max: 4096}}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	h.pid = cmd.Process.Pid
	go h.read(stdout)
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
	if r.err != nil {
		return time.Time{}, fmt.Errorf("initialize: %v", r.err)
	}
	return r.at, nil
}

func (h *host) read(stdout io.Reader) {
	defer close(h.done)
	r := jsonstream.NewReader(bufio.NewReaderSize(stdout, 4<<20))
	r.NewDigest = func() hash.Hash64 {
		d := &maphash.Hash{}
		d.SetSeed(h.seed)
		return d
	}
	r.Hash = func(p []string) bool {
		return len(p) == 2 && p[0] == "result" && (p[1] == "stdout" || p[1] == "stderr")
	}
	// Output chunks are digested as they come, from the reader's memory.
	r.Raw = func(p []string) bool { return len(p) == 2 && p[0] == "params" && p[1] == "chunk" }
	for {
		v, err := r.Next()
		if err != nil {
			h.mu.Lock()
			if !errors.Is(err, io.EOF) {
				h.readErr = err
			}
			for id, ch := range h.waiting {
				close(ch)
				delete(h.waiting, id)
			}
			h.mu.Unlock()
			return
		}
		h.dispatch(v)
	}
}

func (h *host) dispatch(v any) {
	m, _ := v.(map[string]any)
	now := time.Now()
	id, hasID := m["id"]
	method, _ := m["method"].(string)
	if hasID && method != "" {
		// A worker→host call: the bench host serves none.
		h.write(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32601, "message": "not served by the bench host"}})
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if hasID {
		key := fmt.Sprint(id)
		ch := h.waiting[key]
		delete(h.waiting, key)
		if ch != nil {
			r := reply{result: m["result"], at: now}
			r.err, _ = m["error"].(map[string]any)
			ch <- r
		}
		return
	}
	if method != "execute.log" {
		return
	}
	inv, _ := m["paperclipInvocationId"].(string)
	params, _ := m["params"].(map[string]any)
	chunk, _ := params["chunk"].(jsonstream.Bytes)
	l := h.logs[inv]
	if l == nil {
		l = &streamLog{}
		h.logs[inv] = l
	}
	l.chunks++
	switch params["stream"] {
	case "stdout":
		l.stdout.write(h.seed, chunk)
	case "stderr":
		l.stderr.write(h.seed, chunk)
	}
}

func (h *host) write(msg any) error {
	line, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	_, err = h.stdin.Write(append(line, '\n'))
	return err
}

// request is one host request to send.
type request struct {
	method     string
	params     any
	invocation string
}

// send writes the requests in one write (as a busy host does) and returns
// the channels their replies arrive on.
func (h *host) send(reqs ...request) ([]chan reply, error) {
	var buf bytes.Buffer
	chans := make([]chan reply, len(reqs))
	h.mu.Lock()
	for i, r := range reqs {
		h.nextID++
		msg := map[string]any{"jsonrpc": "2.0", "id": h.nextID, "method": r.method, "params": r.params}
		if r.invocation != "" {
			msg["paperclipInvocation"] = map[string]any{"id": r.invocation, "scope": map[string]any{"companyId": "c-bench"}}
		}
		line, err := json.Marshal(msg)
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		buf.Write(line)
		buf.WriteByte('\n')
		chans[i] = make(chan reply, 1)
		h.waiting[strconv.Itoa(h.nextID)] = chans[i]
	}
	h.mu.Unlock()
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	_, err := h.stdin.Write(buf.Bytes())
	return chans, err
}

// wait returns the reply on ch, or an error after d or when the worker
// closed its stdout.
func (h *host) wait(ch chan reply, d time.Duration) (reply, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r, ok := <-ch:
		if !ok {
			h.mu.Lock()
			err := h.readErr
			h.mu.Unlock()
			return reply{}, fmt.Errorf("the worker closed its output without replying (read error %v; stderr %q)", err, h.stderr.String())
		}
		return r, nil
	case <-t.C:
		return reply{}, fmt.Errorf("no reply within %s", d)
	}
}

func (h *host) call(method string, params any, invocation string, d time.Duration) (reply, error) {
	chans, err := h.send(request{method: method, params: params, invocation: invocation})
	if err != nil {
		return reply{}, err
	}
	return h.wait(chans[0], d)
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
	_ = h.stdin.Close()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
	}
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
}

// tailBuffer keeps the last max bytes written (a worker's stderr, for
// failure messages).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
