package pty

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// checkingSink fails the test on any event a host would reject or that
// breaks a route's life: output or an exit for a route never started, or
// after its exit, or a second exit.
type checkingSink struct {
	t       *testing.T
	mu      sync.Mutex
	started map[Route]bool
	exited  map[Route]bool
	events  int
	// failOneIn > 0 fails about one delivery in that many, as a host that
	// went away does.
	failOneIn int
	rng       *rand.Rand
}

func newCheckingSink(t *testing.T, seed uint64) *checkingSink {
	return &checkingSink{t: t, started: map[Route]bool{}, exited: map[Route]bool{}, rng: rand.New(rand.NewPCG(seed, 1))}
}

func (c *checkingSink) start(r Route) {
	c.mu.Lock()
	c.started[r] = true
	c.mu.Unlock()
}

func (c *checkingSink) event(r Route, kind string, exit bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events++
	switch {
	case !c.started[r]:
		c.t.Errorf("%s for %+v, which was never started", kind, r)
	case c.exited[r]:
		c.t.Errorf("%s for %+v after its exit", kind, r)
	}
	if exit {
		c.exited[r] = true
	}
	if c.failOneIn > 0 && c.rng.IntN(c.failOneIn) == 0 {
		return errors.New("the host is gone")
	}
	return nil
}

// pause now and then holds a delivery a little, as a host busy elsewhere
// does, so outboxes fill and readers wait.
func (c *checkingSink) pause() {
	c.mu.Lock()
	d := time.Duration(0)
	if c.rng.IntN(8) == 0 {
		d = time.Duration(c.rng.IntN(3)) * time.Millisecond
	}
	c.mu.Unlock()
	time.Sleep(d)
}

func (c *checkingSink) LoginOutput(r Route, _ string) error {
	c.pause()
	return c.event(r, "output", false)
}

func (c *checkingSink) LoginExit(r Route, _ *int) error {
	return c.event(r, "login exit", true)
}

func (c *checkingSink) DuplexData(r Route, _ []byte) error {
	c.pause()
	return c.event(r, "data", false)
}

func (c *checkingSink) DuplexExit(r Route, _ *int, _ bool) error {
	return c.event(r, "exit", true)
}

var randomCommands = [][]string{
	{"cat"},
	{"true"},
	{"sh", "-c", "exit 3"},
	{"head", "-c", "300000", "/dev/urandom"},
	{"sh", "-c", `printf '\342\202'; sleep 0.05; printf '\254'; exec cat`},
	{"sleep", "30"},
}

// TestRandomTerminalInterleavings drives login PTYs and duplex channels on
// the emulator through random mixes of input, stops, closes (twice, racing),
// lease closes, unanswered opens and dropped sockets, with a host that is
// sometimes slow, and checks that no route hears anything after its exit or
// before its start, that every call returns, and (TestMain) that nothing is
// left running. DAYTONA_PTY_RANDOM_SEEDS sets how many rounds run.
func TestRandomTerminalInterleavings(t *testing.T) {
	t.Parallel()
	rounds := randomSeeds(3)
	sb := newSandbox(t)
	sb.bin(t, "claude", standIn(t, "claude"))
	for round := range rounds {
		seed := uint64(round + 1)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			sink := newCheckingSink(t, seed)
			m := newManager(t, sink, Options{OutboxBytes: 4 << 10, Remember: 16})
			rng := rand.New(rand.NewPCG(seed, 2))
			if rng.IntN(2) == 0 {
				remove := sb.env.Server.AddFault(emulator.Fault{Path: `/process/pty/[^/]+/connect$`, DropWebSocketAfterBytes: 1 + rng.IntN(64<<10), Times: 2})
				defer remove()
			}
			var wg sync.WaitGroup
			for i := range 6 {
				lease := fmt.Sprint("lease-", i%2)
				opSeed := rng.Uint64()
				wg.Add(1)
				go func() {
					defer wg.Done()
					playOneTerminal(t, m, sb, sink, fmt.Sprintf("route-%d-%d", seed, i), lease, opSeed)
				}()
			}
			wg.Wait()
			sink.mu.Lock()
			t.Logf("%d routes started, %d exits, %d events", len(sink.started), len(sink.exited), sink.events)
			sink.mu.Unlock()
		})
	}
}

func playOneTerminal(t *testing.T, m *Manager, sb *sandbox, sink *checkingSink, route, lease string, seed uint64) {
	open := func(ctx context.Context, login bool, rng *rand.Rand) (*Opening, error) {
		if login {
			return m.OpenLogin(ctx, sb.tb, LoginRequest{HostRouteID: route, ProviderLeaseID: lease, CommandKey: "claude", SessionHome: sessionHome(t)})
		}
		return m.OpenDuplex(ctx, sb.tb, DuplexRequest{HostRouteID: route, ProviderLeaseID: lease, Command: randomCommands[rng.IntN(len(randomCommands))]})
	}
	act := func(ctx context.Context, rng *rand.Rand, login bool, rt Route) {
		switch rng.IntN(30) {
		case 0:
			_ = stopRoute(ctx, m, login, rt)
		case 1:
			closeRoute(m, login, rt.HostRouteID)
		case 2, 5:
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); closeRoute(m, login, rt.HostRouteID) }()
			}
			wg.Wait()
		case 3:
			m.CloseLease(ctx, lease)
		case 4, 6, 7, 8, 9:
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		default:
			p := make([]byte, 1+rng.IntN(70<<10))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if login {
				p = []byte("CODE\r")
			}
			if err := inputRoute(ctx, m, login, rt, p); err != nil && !errors.Is(err, ErrEnded) {
				t.Logf("%s: input: %v", rt.HostRouteID, err) // a failed write ends the route: allowed
			}
		}
	}
	playRoute(t, m, sink, route, seed, 60*time.Second, open, act)
}

// playRoute plays one route: open it (a login one time in three), then
// start it, or leave its reply unwritten one time in six, act on it 1 to 30
// times and close it. An open that fails is closed and logged: a quick
// command may end before it is seen to start, a dropped socket fails it.
func playRoute(t *testing.T, m *Manager, sink *checkingSink, route string, seed uint64, timeout time.Duration,
	open func(ctx context.Context, login bool, rng *rand.Rand) (*Opening, error),
	act func(ctx context.Context, rng *rand.Rand, login bool, rt Route)) {
	rng := rand.New(rand.NewPCG(seed, 3))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	login := rng.IntN(3) == 0
	op, err := open(ctx, login, rng)
	if err != nil {
		t.Logf("%s: open: %v", route, err)
		closeRoute(m, login, route)
		return
	}
	rt := op.Route()
	if rng.IntN(6) == 0 {
		op.Start(false)
	} else {
		sink.start(rt)
		op.Start(true)
	}
	for range 1 + rng.IntN(30) {
		act(ctx, rng, login, rt)
	}
	closeRoute(m, login, rt.HostRouteID)
}

// randomSeeds is how many rounds a randomized play runs: n, unless
// DAYTONA_PTY_RANDOM_SEEDS says otherwise.
func randomSeeds(n int) int {
	if v, err := strconv.Atoi(os.Getenv("DAYTONA_PTY_RANDOM_SEEDS")); err == nil && v > 0 {
		return v
	}
	return n
}

func closeRoute(m *Manager, login bool, route string) {
	if login {
		m.LoginClose(route)
	} else {
		m.DuplexClose(route)
	}
}

func stopRoute(ctx context.Context, m *Manager, login bool, rt Route) error {
	if login {
		return m.LoginStop(ctx, rt.SessionID)
	}
	return m.DuplexStop(ctx, rt)
}

func inputRoute(ctx context.Context, m *Manager, login bool, rt Route, p []byte) error {
	if login {
		return m.LoginInput(ctx, rt.SessionID, p)
	}
	return m.DuplexWrite(ctx, rt, p)
}
