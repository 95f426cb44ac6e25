package pty

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/paperclipai/daytona-worker/daytona"
)

// oddDaemon is a toolbox whose PTY sockets behave as a daemon (or the
// proxies in front of it) may: output before "connected", text frames of
// any size, "exited" messages, pings, and every way of ending (close frames
// with odd codes and reasons, a dropped connection, a hang until the kill).
// Each PTY's behaviour comes from its id and the seed.
type oddDaemon struct {
	seed uint64

	mu     sync.Mutex
	killed map[string]chan struct{} // closed by the kill
}

func newOddDaemon(t *testing.T, seed uint64) *daytona.Toolbox {
	d := &oddDaemon{seed: seed, killed: map[string]chan struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /toolbox/sb/process/pty", d.create)
	mux.HandleFunc("DELETE /toolbox/sb/process/pty/{id}", d.kill)
	mux.HandleFunc("GET /toolbox/sb/process/pty/{id}/connect", d.connect)
	mux.HandleFunc("POST /toolbox/sb/process/execute", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"exitCode":0,"result":""}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := daytona.New(daytona.Config{APIKey: "test-key-0123456789", APIURL: srv.URL + "/api", HTTPClient: daytona.NewHTTPClient()})
	if err != nil {
		t.Fatal(err)
	}
	return c.ToolboxFor("sb", srv.URL+"/toolbox")
}

func (d *oddDaemon) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	d.mu.Lock()
	d.killed[req.ID] = make(chan struct{})
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"sessionId":%q}`, req.ID)
}

func (d *oddDaemon) kill(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	ch, ok := d.killed[r.PathValue("id")]
	delete(d.killed, r.PathValue("id"))
	d.mu.Unlock()
	if !ok {
		http.Error(w, `{"message":"PTY session not found"}`, http.StatusNotFound)
		return
	}
	close(ch)
	w.WriteHeader(http.StatusNoContent)
}

func (d *oddDaemon) killedChan(id string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ch, ok := d.killed[id]; ok {
		return ch
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

func (d *oddDaemon) connect(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	rng := rand.New(rand.NewPCG(d.seed, h.Sum64()))
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"X-Daytona-Pty-Exit-Control"}})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	ctx := r.Context()
	killed := d.killedChan(id)
	if rng.IntN(8) == 0 {
		_ = conn.Write(ctx, websocket.MessageBinary, []byte("early "))
	}
	switch rng.IntN(12) {
	case 0:
		_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"error","error":"PTY session not found"}`))
		return
	case 1:
		return // dropped before "connected"
	}
	_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"connected"}`))

	// Input: the duplex launch line is answered with its ready marker (or
	// the shell "exits" before it); what follows is echoed.
	uid, _ := strings.CutPrefix(id, duplexPTYPrefix)
	inputs := make(chan []byte, 64)
	go func() {
		defer close(inputs)
		for {
			_, p, err := conn.Read(ctx)
			if err != nil {
				return
			}
			select {
			case inputs <- p:
			case <-ctx.Done():
				return
			}
		}
	}()
	lines := 0
	// heard answers one input; false once the client has gone.
	heard := func(p []byte, ok bool) bool {
		if ok {
			lines++
			answer(ctx, conn, p, lines, uid)
		}
		return ok
	}
	for step := range 40 + rng.IntN(40) {
		select {
		case <-killed:
			d.end(ctx, conn, rng, true)
			return
		case p, ok := <-inputs:
			if !heard(p, ok) {
				return
			}
			continue
		default:
		}
		switch rng.IntN(20) {
		case 0:
			_ = conn.Write(ctx, websocket.MessageText, bytes.Repeat([]byte("t"), 1+rng.IntN(100<<10)))
		case 1:
			_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"exited","exitCode":3}`))
		case 2:
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_ = conn.Ping(pctx)
			cancel()
		case 3:
			_ = conn.Write(ctx, websocket.MessageBinary, []byte{0xe2, 0x82}) // a character cut in two
			_ = conn.Write(ctx, websocket.MessageBinary, []byte{0xac})
		case 4:
			if step > 10 && rng.IntN(4) == 0 {
				d.end(ctx, conn, rng, false)
				return
			}
		default:
			_ = conn.Write(ctx, websocket.MessageBinary, bytes.Repeat([]byte{byte(rng.Uint32())}, 1+rng.IntN(40<<10)))
		}
	}
	// Then it waits for the kill or for the client to go.
	for {
		select {
		case <-killed:
			d.end(ctx, conn, rng, true)
			return
		case p, ok := <-inputs:
			if !heard(p, ok) {
				return
			}
		}
	}
}

// answer echoes input, except that the duplex launch line is answered with
// its ready marker.
func answer(ctx context.Context, conn *websocket.Conn, p []byte, line int, uid string) {
	if line == 1 && bytes.Contains(p, []byte("paperclip-duplex-ready;")) {
		p = append([]byte("prompt$ "), readyMarker(uid)...)
	}
	_ = conn.Write(ctx, websocket.MessageBinary, p)
}

// end finishes a socket one of the ways a daemon or a proxy does.
func (d *oddDaemon) end(ctx context.Context, conn *websocket.Conn, rng *rand.Rand, killed bool) {
	if killed && rng.IntN(2) == 0 {
		_ = conn.Close(websocket.StatusInternalError, `{"exitCode":137,"exitReason":"SIGKILL"}`)
		return
	}
	switch rng.IntN(8) {
	case 0:
		_ = conn.Close(websocket.StatusNormalClosure, `{"exitCode":0}`)
	case 1:
		_ = conn.Close(websocket.StatusNormalClosure, "")
	case 2:
		_ = conn.Close(websocket.StatusPolicyViolation, "slow consumer")
	case 3:
		_ = conn.Close(websocket.StatusCode(4000+rng.IntN(999)), `{"exitCode":"nine"}`)
	case 4:
		_ = conn.Close(websocket.StatusGoingAway, strings.Repeat("é", 61))
	case 5:
		_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"control","status":"exited","exitCode":5,"exitReason":"non-zero exit"}`))
		_ = conn.CloseNow()
	default:
		_ = conn.CloseNow()
	}
}

// TestOddDaemonSocketsKeepEveryRouteWellFormed plays random host actions on
// duplex channels and logins whose PTY sockets end in every odd way a
// daemon can end them, and checks what TestRandomTerminalInterleavings
// checks.
func TestOddDaemonSocketsKeepEveryRouteWellFormed(t *testing.T) {
	t.Parallel()
	seeds := randomSeeds(20)
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			tb := newOddDaemon(t, seed)
			sink := newCheckingSink(t, seed)
			m := newManager(t, sink, Options{OutboxBytes: 8 << 10, Remember: 16})
			rng := rand.New(rand.NewPCG(seed, 7))
			sink.failOneIn = 50 * (1 + rng.IntN(4))
			var wg sync.WaitGroup
			for i := range 8 {
				opSeed := rng.Uint64()
				wg.Add(1)
				go func() {
					defer wg.Done()
					playOddTerminal(t, m, tb, sink, fmt.Sprintf("route-%d", i), fmt.Sprint("lease-", i%2), opSeed)
				}()
			}
			if rng.IntN(3) == 0 {
				// The worker shuts down in the middle of it all.
				time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
				cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := m.Close(cctx); err != nil {
					t.Errorf("Close: %v", err)
				}
				cancel()
			}
			wg.Wait()
			sink.mu.Lock()
			t.Logf("%d routes started, %d exits, %d events", len(sink.started), len(sink.exited), sink.events)
			sink.mu.Unlock()
		})
	}
}

func playOddTerminal(t *testing.T, m *Manager, tb *daytona.Toolbox, sink *checkingSink, route, lease string, seed uint64) {
	open := func(ctx context.Context, login bool, _ *rand.Rand) (*Opening, error) {
		if login {
			return m.OpenLogin(ctx, tb, LoginRequest{HostRouteID: route, ProviderLeaseID: lease, CommandKey: "codex", SessionHome: "/tmp/paperclip-adapter-login/00000000-0000-0000-0000-000000000000"})
		}
		return m.OpenDuplex(ctx, tb, DuplexRequest{HostRouteID: route, ProviderLeaseID: lease, Command: []string{"cat"}})
	}
	act := func(ctx context.Context, rng *rand.Rand, login bool, rt Route) {
		switch rng.IntN(30) {
		case 0:
			_ = stopRoute(ctx, m, login, rt)
		case 1:
			closeRoute(m, login, rt.HostRouteID)
		case 2:
			m.CloseLease(ctx, lease)
		case 3, 4, 5, 6:
			time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
		default:
			_ = inputRoute(ctx, m, login, rt, bytes.Repeat([]byte{'w'}, 1+rng.IntN(70<<10)))
		}
	}
	playRoute(t, m, sink, route, seed, 30*time.Second, open, act)
}
