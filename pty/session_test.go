package pty

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

func TestLoginRunsTheCLIAndCarriesItsTextBothWays(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	sb.bin(t, "claude", standIn(t, "claude"))
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	home := sessionHome(t)
	op, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "route-1", ProviderLeaseID: sb.sb.ID, CommandKey: "claude", SessionHome: home})
	if err != nil {
		t.Fatal(err)
	}
	rt := op.Route()
	if !strings.HasPrefix(rt.SessionID, "pty-") || rt.HostRouteID != "route-1" {
		t.Fatalf("route = %+v", rt)
	}
	// Output arrives before the reply is out: it waits, nothing is emitted.
	waitUntil(t, "output queued before Start", func() bool { return op.s.out.buffered() > 0 })
	if evs := rec.snapshot(); len(evs) != 0 {
		t.Fatalf("emitted before Start: %s", describe(evs))
	}
	op.Start(true)
	rec.waitFor(t, "the prompt", func(evs []event) bool { return strings.Contains(text(evs, rt), "Paste code here if prompted > ") })
	if err := m.LoginInput(t.Context(), rt.SessionID, []byte("CODE-123\r")); err != nil {
		t.Fatal(err)
	}
	evs := rec.waitFor(t, "the exit", func(evs []event) bool { return exitOf(evs, rt) != nil })
	out := text(evs, rt)
	for _, want := range []string{
		"exec claude setup-token", // the launch line, echoed by the terminal
		"size 30 120",
		"https://claude.ai/oauth/authorize?code=true&state=stand-in",
		"€ received [CODE-123]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, e := range evs {
		if e.kind == "output" && (strings.ContainsRune(e.text, utf8.RuneError) || e.text == "") {
			t.Errorf("chunk %q: a character was mangled or the chunk is empty", e.text)
		}
	}
	if e := exitOf(evs, rt); e.code == nil || *e.code != 7 || evs[len(evs)-1].kind != "loginExit" {
		t.Errorf("exit = %+v (last event %s)", e, evs[len(evs)-1].kind)
	}
	// Close, stop and input after the end.
	m.LoginClose("route-1")
	m.LoginClose("route-1")
	if err := m.LoginStop(t.Context(), rt.SessionID); err != nil {
		t.Errorf("stop after close: %v", err)
	}
	if err := m.LoginInput(t.Context(), rt.SessionID, []byte("x")); !errors.Is(err, ErrEnded) {
		t.Errorf("input after close: %v", err)
	}
	if err := m.LoginInput(t.Context(), "pty-nope", []byte("x")); !errors.Is(err, ErrNotOpen) {
		t.Errorf("input to an unknown session: %v", err)
	}
	if err := m.LoginStop(t.Context(), "pty-nope"); !errors.Is(err, ErrNotOpen) {
		t.Errorf("stop of an unknown session: %v", err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLoginHomesForCodexAndGrok(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	sb.bin(t, "codex", standIn(t, "device-login"))
	sb.bin(t, "grok", standIn(t, "device-login"))
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	for i, key := range []string{"codex", "grok"} {
		home := sessionHome(t)
		op, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: key, ProviderLeaseID: sb.sb.ID, CommandKey: key, SessionHome: home})
		if err != nil {
			t.Fatal(err)
		}
		op.Start(true)
		evs := rec.waitFor(t, key+" exit", func(evs []event) bool { return exitOf(evs, op.Route()) != nil })
		variable := map[string]string{"codex": "CODEX_HOME", "grok": "GROK_HOME"}[key]
		if out := text(evs, op.Route()); !strings.Contains(out, variable+" is "+home) {
			t.Errorf("%s (%d): output %q", key, i, out)
		}
		if e := exitOf(evs, op.Route()); e.code == nil || *e.code != 0 {
			t.Errorf("%s exit = %+v", key, e)
		}
	}
	// An existing home is fine: a second login with the same home opens.
	home := sessionHome(t)
	for i := range 2 {
		op, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: fmt.Sprintf("again-%d", i), ProviderLeaseID: sb.sb.ID, CommandKey: "codex", SessionHome: home})
		if err != nil {
			t.Fatal(err)
		}
		op.Start(true)
		rec.waitFor(t, "exit", func(evs []event) bool { return exitOf(evs, op.Route()) != nil })
		m.LoginClose(op.Route().HostRouteID)
	}
}

func TestLoginRejectsBadDescriptorsAndFailedHomes(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	before := sb.env.Server.Requests()
	if _, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "r", CommandKey: "gemini", SessionHome: sessionHome(t)}); !errors.Is(err, ErrDescriptorRejected) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "r", CommandKey: "claude", SessionHome: "/tmp/paperclip-adapter-login/../etc"}); !errors.Is(err, ErrDescriptorRejected) {
		t.Errorf("bad home: %v", err)
	}
	after := sb.env.Server.Requests()
	for route, n := range after {
		if before[route] != n {
			t.Errorf("a rejected descriptor reached the sandbox: %s", route)
		}
	}
	// A profile that ends the shell makes the home command fail.
	writeFile(t, sb.home+"/.profile", "exit 3\n", 0o644)
	_, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "r2", CommandKey: "claude", SessionHome: sessionHome(t)})
	if !errors.Is(err, ErrHomeRejected) || err.Error() != "LOGIN_PTY_HOME_REJECTED" {
		t.Errorf("failing home command: %v", err)
	}
	if evs := rec.snapshot(); len(evs) != 0 {
		t.Errorf("a failed open emitted: %s", describe(evs))
	}
}

// openCat opens a duplex channel running cat and starts it.
func openCat(t *testing.T, m *Manager, sb *sandbox, route string) Route {
	t.Helper()
	op, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: route, ProviderLeaseID: sb.sb.ID, Command: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(op.Route().SessionID, "duplex-") {
		t.Fatalf("route = %+v", op.Route())
	}
	op.Start(true)
	return op.Route()
}

func TestDuplexEchoesEveryByteValueThroughCat(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	rt := openCat(t, m, sb, "duplex-route-1")
	var want bytes.Buffer
	for range 64 {
		for b := range 256 {
			want.WriteByte(byte(b))
		}
	}
	rnd := make([]byte, 2<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range rnd {
		rnd[i] = byte(rng.Uint32())
	}
	want.Write(rnd)
	payload := want.Bytes()
	for off := 0; off < len(payload); {
		n := min(len(payload)-off, 1+rng.IntN(200<<10))
		if err := m.DuplexWrite(t.Context(), rt, payload[off:off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	evs := rec.waitFor(t, "the echo", func(evs []event) bool { return len(data(evs, rt)) >= len(payload) })
	got := data(evs, rt)
	if !bytes.Equal(got, payload) {
		i := 0
		for i < min(len(got), len(payload)) && got[i] == payload[i] {
			i++
		}
		t.Fatalf("echo differs at byte %d of %d (got %d bytes)", i, len(payload), len(got))
	}
	for _, e := range evs {
		if e.kind == "data" && (len(e.data) == 0 || len(e.data) > 262_144) {
			t.Fatalf("a data chunk of %d bytes", len(e.data))
		}
	}
	if got := m.DuplexClose(rt.HostRouteID); got != rt.SessionID {
		t.Errorf("close acknowledged %q, want %q", got, rt.SessionID)
	}
}

func TestDuplexActsOnlyOnTheExactPair(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	a := openCat(t, m, sb, "duplex-route-1")
	b := openCat(t, m, sb, "duplex-route-2")
	for _, foreign := range []Route{
		{HostRouteID: a.HostRouteID, SessionID: b.SessionID},
		{HostRouteID: b.HostRouteID, SessionID: a.SessionID},
		{HostRouteID: "duplex-route-9", SessionID: a.SessionID},
		{HostRouteID: a.HostRouteID, SessionID: ""},
	} {
		if err := m.DuplexWrite(t.Context(), foreign, []byte("WRONG")); !errors.Is(err, ErrNotOpen) {
			t.Errorf("write to %+v: %v", foreign, err)
		}
		if err := m.DuplexStop(t.Context(), foreign); !errors.Is(err, ErrNotOpen) {
			t.Errorf("stop of %+v: %v", foreign, err)
		}
	}
	if err := m.DuplexWrite(t.Context(), a, []byte("to-a")); err != nil {
		t.Fatal(err)
	}
	if err := m.DuplexWrite(t.Context(), b, []byte("to-b")); err != nil {
		t.Fatal(err)
	}
	evs := rec.waitFor(t, "both echoes", func(evs []event) bool { return len(data(evs, a)) >= 4 && len(data(evs, b)) >= 4 })
	if string(data(evs, a)) != "to-a" || string(data(evs, b)) != "to-b" {
		t.Errorf("a got %q, b got %q", data(evs, a), data(evs, b))
	}
	// A route id is bound once: opening it again is refused.
	if _, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: a.HostRouteID, Command: []string{"cat"}}); err == nil {
		t.Error("a second open of a live route succeeded")
	}
	m.DuplexClose(a.HostRouteID)
	if _, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: a.HostRouteID, Command: []string{"cat"}}); err == nil {
		t.Error("an open of a closed route succeeded")
	}
}

func TestDuplexStopReportsTheExitAndCloseSilences(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})

	// Stop: the process is killed, the exit is reported, the pair stays
	// bound until the host closes it.
	a := openCat(t, m, sb, "duplex-route-1")
	if err := m.DuplexStop(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	evs := rec.waitFor(t, "the stopped exit", func(evs []event) bool { return exitOf(evs, a) != nil })
	if e := exitOf(evs, a); e.code == nil || *e.code != 137 || e.transportClosed {
		t.Errorf("exit after stop = %+v", e)
	}
	if err := m.DuplexStop(t.Context(), a); err != nil {
		t.Errorf("a second stop: %v", err)
	}
	if err := m.DuplexWrite(t.Context(), a, []byte("late")); !errors.Is(err, ErrEnded) {
		t.Errorf("write after the exit: %v", err)
	}
	if got := m.DuplexClose(a.HostRouteID); got != a.SessionID {
		t.Errorf("close = %q", got)
	}

	// Close first: the process is killed and nothing more is emitted.
	b := openCat(t, m, sb, "duplex-route-2")
	if err := m.DuplexWrite(t.Context(), b, []byte("ping")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the echo", func(evs []event) bool { return len(data(evs, b)) == 4 })
	if got := m.DuplexClose(b.HostRouteID); got != b.SessionID {
		t.Errorf("close = %q", got)
	}
	// Close, stop and write racing after it are all harmless.
	if got := m.DuplexClose(b.HostRouteID); got != b.SessionID {
		t.Errorf("a second close = %q, want the bound session", got)
	}
	if err := m.DuplexStop(t.Context(), b); err != nil {
		t.Errorf("stop after close: %v", err)
	}
	if err := m.DuplexWrite(t.Context(), b, []byte("x")); !errors.Is(err, ErrEnded) {
		t.Errorf("write after close: %v", err)
	}
	if got := m.DuplexClose("duplex-route-never"); got != "" {
		t.Errorf("close of an unknown route = %q", got)
	}
	waitUntil(t, "the closed channel's process to end", func() bool { return sb.env.Server.LiveProcesses() == 0 })
	if e := exitOf(rec.snapshot(), b); e != nil {
		t.Errorf("an exit was emitted after the close: %+v", e)
	}
}

func TestDuplexSocketLostWithoutExitIsATransportClose(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	// The connection is cut, with no close frame, after 256 KiB of output.
	sb.env.Server.AddFault(emulator.Fault{Path: `/process/pty/[^/]+/connect$`, DropWebSocketAfterBytes: 256 << 10})
	rt := openCat(t, m, sb, "duplex-route-1")
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	for off := 0; off < len(payload); off += 128 << 10 {
		if err := m.DuplexWrite(t.Context(), rt, payload[off:off+128<<10]); err != nil {
			break // the socket may already be gone
		}
	}
	evs := rec.waitFor(t, "the exit", func(evs []event) bool { return exitOf(evs, rt) != nil })
	if e := exitOf(evs, rt); e.code != nil || !e.transportClosed {
		t.Errorf("exit = %+v, want a transport close", e)
	}
	got := data(evs, rt)
	if len(got) >= len(payload) || !bytes.Equal(got, payload[:len(got)]) {
		t.Errorf("got %d bytes, not a prefix of what was written", len(got))
	}
	if err := m.DuplexWrite(t.Context(), rt, []byte("x")); !errors.Is(err, ErrEnded) {
		t.Errorf("write after the loss: %v", err)
	}
}

func TestOpenFailuresEmitNothing(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	// The shell exits before it reads the launch line.
	writeFile(t, sb.home+"/.bash_profile", "exit 5\n", 0o644)
	_, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-1", ProviderLeaseID: sb.sb.ID, Command: []string{"cat"}})
	if err == nil || !strings.Contains(err.Error(), "ended before the command started") {
		t.Fatalf("open = %v", err)
	}
	sid := m.DuplexClose("duplex-route-1")
	if !strings.HasPrefix(sid, "duplex-") {
		t.Errorf("close of a failed open acknowledged %q", sid)
	}
	_, err = m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-2", Command: nil})
	if !errors.Is(err, ErrEmptyCommand) {
		t.Errorf("empty command: %v", err)
	}
	if evs := rec.snapshot(); len(evs) != 0 {
		t.Errorf("failed opens emitted: %s", describe(evs))
	}
}

func TestCloseWhileOpeningAbandonsTheSession(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	// The shell takes its time to start, so the close lands mid-open.
	writeFile(t, sb.home+"/.bash_profile", "sleep 2\n", 0o644)
	done := make(chan error, 1)
	go func() {
		_, err := m.OpenDuplex(context.Background(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-1", ProviderLeaseID: sb.sb.ID, Command: []string{"cat"}})
		done <- err
	}()
	waitUntil(t, "the open to register", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.duplexes["duplex-route-1"] != nil
	})
	sid := m.DuplexClose("duplex-route-1")
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed while it was opening") {
		t.Fatalf("open = %v", err)
	}
	if again := m.DuplexClose("duplex-route-1"); again != sid || sid == "" {
		t.Errorf("close acknowledged %q, then %q", sid, again)
	}
	waitUntil(t, "the abandoned terminal to end", func() bool { return sb.env.Server.LiveProcesses() == 0 })
	if evs := rec.snapshot(); len(evs) != 0 {
		t.Errorf("an abandoned open emitted: %s", describe(evs))
	}
}

func TestStartFalseAbandonsTheSession(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	op, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-1", ProviderLeaseID: sb.sb.ID, Command: []string{"sh", "-c", "echo early; exec cat"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "output queued", func() bool { return op.s.out.buffered() > 0 })
	op.Start(false)
	waitUntil(t, "the abandoned terminal to end", func() bool { return sb.env.Server.LiveProcesses() == 0 })
	if evs := rec.snapshot(); len(evs) != 0 {
		t.Errorf("an unanswered open emitted: %s", describe(evs))
	}
	if got := m.DuplexClose("duplex-route-1"); got != op.Route().SessionID {
		t.Errorf("close = %q", got)
	}
}

func TestCloseLeaseEndsItsSessionsOnly(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	sb.bin(t, "claude", standIn(t, "claude"))
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	a := openCat(t, m, sb, "duplex-route-1")
	op, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "login-1", ProviderLeaseID: sb.sb.ID, CommandKey: "claude", SessionHome: sessionHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	op.Start(true)
	login := op.Route()
	other, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-2", ProviderLeaseID: "another-lease", Command: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	other.Start(true)
	m.CloseLease(t.Context(), sb.sb.ID)
	evs := rec.waitFor(t, "both exits", func(evs []event) bool { return exitOf(evs, a) != nil && exitOf(evs, login) != nil })
	if e := exitOf(evs, a); !(e.code != nil && *e.code == 137) && !e.transportClosed {
		t.Errorf("duplex exit = %+v", e)
	}
	// The host has not closed the routes: the bound session is still echoed.
	if got := m.DuplexClose(a.HostRouteID); got != a.SessionID {
		t.Errorf("close after the teardown = %q, want %q", got, a.SessionID)
	}
	if err := m.DuplexWrite(t.Context(), other.Route(), []byte("alive")); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the other lease's echo", func(evs []event) bool { return string(data(evs, other.Route())) == "alive" })
}

func TestSlowHostStopsTheReaderInsteadOfBuffering(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	hold := make(chan struct{})
	rec.hold = hold
	const limit = 64 << 10
	m := newManager(t, rec, Options{OutboxBytes: limit})
	op, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-1", ProviderLeaseID: sb.sb.ID, Command: []string{"head", "-c", "33554432", "/dev/zero"}})
	if err != nil {
		t.Fatal(err)
	}
	op.Start(true)
	<-rec.holding // the first delivery waits for the host
	// Then the terminal's reader waits for room, unless the daemon gave up
	// on it first (its queue for a client is bounded too).
	select {
	case <-op.s.out.full:
	case <-op.s.term.done():
	case <-time.After(60 * time.Second):
		t.Fatal("the reader neither filled the outbox nor ended")
	}
	if n := op.s.out.buffered(); n > limit+32<<10 {
		t.Errorf("%d bytes queued, over the bound", n)
	}
	rec.mu.Lock()
	rec.hold = nil
	rec.mu.Unlock()
	close(hold)
	evs := rec.waitFor(t, "the end", func(evs []event) bool { return exitOf(evs, op.Route()) != nil })
	got := data(evs, op.Route())
	if bytes.ContainsFunc(got, func(r rune) bool { return r != 0 }) {
		t.Error("a byte other than NUL came through")
	}
	// All of it, or the daemon gave up on a consumer that slow: either way
	// the worker never held more than its bound.
	e := exitOf(evs, op.Route())
	t.Logf("received %d bytes; exit %+v", len(got), e)
	if !(e.code != nil && *e.code == 0 && len(got) == 32<<20) && !e.transportClosed {
		t.Errorf("exit %+v after %d bytes", e, len(got))
	}
}

func TestCloseEndsEverythingSilently(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := New(Options{Sink: rec, NewID: newIDs(t).next})
	openCat(t, m, sb, "duplex-route-1")
	openCat(t, m, sb, "duplex-route-2")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every terminal to end", func() bool { return sb.env.Server.LiveProcesses() == 0 })
	for _, e := range rec.snapshot() {
		if e.kind == "exit" {
			t.Errorf("an exit was emitted at shutdown: %+v", e)
		}
	}
	if _, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-3", Command: []string{"cat"}}); !errors.Is(err, ErrShutDown) {
		t.Errorf("open after Close: %v", err)
	}
}

// TestAClosedRouteIsAcknowledgedAfterClose: once Close has begun (the
// worker's shutdown) it ends every session itself; a host close then only
// has to be acknowledged, with the session the route bound, and sends
// nothing to a sandbox that may not answer.
func TestAClosedRouteIsAcknowledgedAfterClose(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := New(Options{Sink: rec, NewID: newIDs(t).next})
	duplex := openCat(t, m, sb, "duplex-route-1")
	op, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "login-1", ProviderLeaseID: sb.sb.ID, CommandKey: "claude", SessionHome: sessionHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	op.Start(true)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	const kill = "DELETE /toolbox/{sandboxId}/process/pty/{sessionId}"
	kills := sb.env.Server.Requests()[kill]
	if sid := m.DuplexClose("duplex-route-1"); sid != duplex.SessionID {
		t.Errorf("close after Close = %q, want the bound %q", sid, duplex.SessionID)
	}
	m.LoginClose("login-1")
	if sid := m.DuplexClose("duplex-route-1"); sid != duplex.SessionID {
		t.Errorf("a second close after Close = %q, want %q", sid, duplex.SessionID)
	}
	if n := sb.env.Server.Requests()[kill]; n != kills {
		t.Errorf("closes after Close sent %d PTY kills", n-kills)
	}
}

func TestACloseBeforeItsOpenRefusesTheOpen(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	// Requests run concurrently: the host's close of a route it gave up on
	// can be handled before the open it sent earlier.
	if sid := m.DuplexClose("duplex-route-1"); sid != "" {
		t.Errorf("close of an unknown route = %q", sid)
	}
	if _, err := m.OpenDuplex(t.Context(), sb.tb, DuplexRequest{HostRouteID: "duplex-route-1", ProviderLeaseID: sb.sb.ID, Command: []string{"cat"}}); err == nil {
		t.Error("an open after its route's close succeeded")
	}
	m.LoginClose("login-1")
	if _, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "login-1", ProviderLeaseID: sb.sb.ID, CommandKey: "claude", SessionHome: sessionHome(t)}); err == nil {
		t.Error("a login open after its route's close succeeded")
	}
	if n := sb.env.Server.Requests()["POST /toolbox/{sandboxId}/process/pty"]; n != 0 {
		t.Errorf("%d PTYs created for refused opens", n)
	}
}

func TestClosedRoutesAreRememberedBoundedly(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := newManager(t, rec, Options{Remember: 2})
	var routes []Route
	for i := range 3 {
		routes = append(routes, openCat(t, m, sb, fmt.Sprintf("duplex-route-%d", i)))
	}
	for _, rt := range routes {
		if got := m.DuplexClose(rt.HostRouteID); got != rt.SessionID {
			t.Fatalf("close of %s = %q", rt.HostRouteID, got)
		}
	}
	// The two most recent are still acknowledged with their sessions; the
	// oldest has been forgotten (the host keeps at most 4,096 closed pairs
	// per worker, the worker twice as many by default).
	if got := m.DuplexClose(routes[0].HostRouteID); got != "" {
		t.Errorf("the oldest closed route is still remembered: %q", got)
	}
	for _, rt := range routes[1:] {
		if got := m.DuplexClose(rt.HostRouteID); got != rt.SessionID {
			t.Errorf("late close of %s = %q, want %q", rt.HostRouteID, got, rt.SessionID)
		}
	}
	// Closes of routes never opened (or whose open failed) are remembered
	// apart: however many, they never push out a pair the host bound.
	for i := range 5 {
		m.DuplexClose(fmt.Sprintf("duplex-route-never-%d", i))
	}
	if got := m.DuplexClose(routes[2].HostRouteID); got != routes[2].SessionID {
		t.Errorf("a bound pair was forgotten behind unknown closes: %q", got)
	}
	m.mu.Lock()
	n, other := m.closedDuplex.len(), m.closedOther.len()
	m.mu.Unlock()
	if n > 2 || other > 2 {
		t.Errorf("%d bound and %d other closed routes remembered, bound 2 each", n, other)
	}
}

func TestLoginStopReportsTheExitAndCloseSilences(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	sb.bin(t, "claude", standIn(t, "claude"))
	rec := newRecorder()
	m := newManager(t, rec, Options{})
	open := func(route string) Route {
		op, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: route, ProviderLeaseID: sb.sb.ID, CommandKey: "claude", SessionHome: sessionHome(t)})
		if err != nil {
			t.Fatal(err)
		}
		op.Start(true)
		rt := op.Route()
		rec.waitFor(t, "the prompt", func(evs []event) bool { return strings.Contains(text(evs, rt), "Paste code here") })
		return rt
	}

	// Stop: the CLI is killed, its exit (137) reported; the route stays
	// bound, and input is refused until the host closes it.
	a := open("login-1")
	if err := m.LoginStop(t.Context(), a.SessionID); err != nil {
		t.Fatal(err)
	}
	evs := rec.waitFor(t, "the stopped exit", func(evs []event) bool { return exitOf(evs, a) != nil })
	if e := exitOf(evs, a); e.code == nil || *e.code != 137 {
		t.Errorf("exit after stop = %+v", e)
	}
	if err := m.LoginStop(t.Context(), a.SessionID); err != nil {
		t.Errorf("a second stop: %v", err)
	}
	if err := m.LoginInput(t.Context(), a.SessionID, []byte("x\r")); !errors.Is(err, ErrEnded) {
		t.Errorf("input after the exit: %v", err)
	}
	m.LoginClose(a.HostRouteID)

	// Close while the CLI waits: it is killed and nothing more is emitted.
	b := open("login-2")
	m.LoginClose(b.HostRouteID)
	waitUntil(t, "the closed login's process to end", func() bool { return sb.env.Server.LiveProcesses() == 0 })
	if e := exitOf(rec.snapshot(), b); e != nil {
		t.Errorf("an exit was emitted after the close: %+v", e)
	}
	if err := m.LoginInput(t.Context(), b.SessionID, []byte("x\r")); !errors.Is(err, ErrEnded) {
		t.Errorf("input after the close: %v", err)
	}
}

// A session Close does not know of, because a host close took it off the
// tables and has not silenced it yet, must not start its pump once Close
// has begun: the pump would run after Close stopped waiting (or, started
// during the wait, make the WaitGroup panic) and emit after the shutdown.
func TestAStartAfterCloseOfASessionItDidNotKnowStartsNothing(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t)
	rec := newRecorder()
	m := New(Options{Sink: rec, NewID: newIDs(t).next})
	op, err := m.OpenLogin(t.Context(), sb.tb, LoginRequest{HostRouteID: "login-1", ProviderLeaseID: sb.sb.ID, CommandKey: "claude", SessionHome: sessionHome(t)})
	if err != nil {
		t.Fatal(err)
	}
	// LoginClose's first half: forgotten, shut read as false, not silenced.
	m.mu.Lock()
	m.forgetLocked(op.s)
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	op.Start(true)
	op.s.mu.Lock()
	started := op.s.started
	op.s.mu.Unlock()
	if started {
		t.Error("a pump started after Close returned")
	}
	op.s.silence() // LoginClose's second half
	waitUntil(t, "the terminal to end", func() bool { return sb.env.Server.LiveProcesses() == 0 })
	if evs := rec.snapshot(); len(evs) != 0 {
		t.Errorf("emitted after Close: %s", describe(evs))
	}
}

// Close with a context that has already ended (a shutdown whose input closed
// right after it) is no failure when nothing was left running.
func TestCloseOfNothingSucceedsWithAnEndedContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i := range 50 {
		m := New(Options{Sink: newRecorder(), NewID: newIDs(t).next})
		if err := m.Close(ctx); err != nil {
			t.Fatalf("Close %d: %v", i, err)
		}
	}
}
