package main

// End-to-end checks of loginPty* and duplexChannel*: the real binary against
// the emulator's real PTYs, with a host that routes frames as Paperclip's
// does (terminals_host_test.go) and fails the test wherever that host would
// retire the worker.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
)

// terminalLease starts an emulator and a worker, acquires a lease (the
// config's extra members given) and installs the stand-in CLIs in it.
func terminalLease(t *testing.T, extraConfig string) (*emulatorEnv, *host, lease) {
	t.Helper()
	env := startEmulator(t, emulator.Options{})
	h := startHost(t, hostOptions{})
	l := h.acquire(leaseConfig(env, extraConfig))
	installStandIns(t, env, l)
	return env, h, l
}

// finishTerminals checks the terminal traffic, then destroys the leases and
// shuts the worker down (see finish).
func (h *host) finishTerminals(t *testing.T, env *emulatorEnv, leases ...lease) {
	t.Helper()
	h.checkTerminals(t)
	finish(t, h, env, leases...)
}

// installStandIns puts the stand-in CLIs on the login shell's PATH in the
// lease's sandbox.
func installStandIns(t *testing.T, env *emulatorEnv, l lease) {
	t.Helper()
	home := sandboxView(t, env, l.id).HomeDir
	write := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(home, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
	}
	write(".bash_profile", `export PATH="$HOME/bin:$PATH"`+"\n", 0o644)
	for bin, standIn := range map[string]string{"claude": "claude", "codex": "device-login", "grok": "device-login"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "standins", standIn))
		require.NoError(t, err)
		write("bin/"+bin, string(b), 0o755)
	}
}

// newSessionHome is a login session home, removed with its parent (when
// empty) after the test: sandbox processes share the host's /tmp.
func newSessionHome(t *testing.T) string {
	home := "/tmp/paperclip-adapter-login/" + uuid.NewString()
	t.Cleanup(func() {
		_ = os.RemoveAll(home)
		_ = os.Remove(filepath.Dir(home))
	})
	return home
}

func errMessage(r reply) string {
	if r.Error == nil {
		return ""
	}
	s, _ := r.Error["message"].(string)
	return s
}

func errCode(r reply) string {
	if r.Error == nil {
		return ""
	}
	return fmt.Sprint(r.Error["code"])
}

func TestLoginPtyDrivesAStandInClaude(t *testing.T) {
	t.Parallel()
	env, h, l := terminalLease(t, "")
	r, rep := h.openLogin(l, "claude", newSessionHome(t))
	require.Nil(t, rep.Error, "open: %v", rep.Error)
	assert.Regexp(t, `^pty-[0-9a-f-]{36}$`, r.sid)
	r.waitText("https://claude.ai/oauth/authorize?code=true&state=stand-in")
	r.waitText("Paste code here if prompted > ")
	// The code comes later, as the user pastes it, with the Enter byte.
	require.Nil(t, r.input("CODE-4F2A\r").Error)
	code := r.waitExit()
	require.NotNil(t, code)
	assert.Equal(t, 7, *code)
	out := r.output()
	assert.Contains(t, out, "exec claude setup-token", "the launch line, echoed by the terminal")
	assert.Contains(t, out, "size 30 120", "a 120×30 terminal")
	assert.Contains(t, out, "€ received [CODE-4F2A]", "a character cut across frames comes out whole")
	assert.NotContains(t, out, "\uFFFD")
	h.mu.Lock()
	assert.Zero(t, h.terms.preBind, "nothing is emitted before the open's reply")
	h.mu.Unlock()
	// Input after the exit fails, stop of an ended session is fine, close
	// is acknowledged (twice: it is idempotent).
	assert.NotEmpty(t, errMessage(r.input("late\r")))
	assert.Nil(t, r.stop().Error)
	h.closeLogin(r)
	h.closeLogin(r)
	h.finishTerminals(t, env, l)
}

func TestLoginPtyCreatesCodexAndGrokHomes(t *testing.T) {
	t.Parallel()
	env, h, l := terminalLease(t, "")
	for _, c := range []struct{ key, variable string }{{"codex", "CODEX_HOME"}, {"grok", "GROK_HOME"}} {
		home := newSessionHome(t)
		execs := requestCount(env, routeExecute)
		r, rep := h.openLogin(l, c.key, home)
		require.Nil(t, rep.Error, "%s: %v", c.key, rep.Error)
		assert.Equal(t, execs+1, requestCount(env, routeExecute), "the home is created with one command")
		code := r.waitExit()
		require.NotNil(t, code, c.key)
		assert.Equal(t, 0, *code, c.key)
		assert.Contains(t, r.output(), c.variable+" is "+home, c.key)
		fi, err := os.Stat(home)
		require.NoError(t, err, "the session home exists")
		assert.True(t, fi.IsDir())
		h.closeLogin(r)
	}
	h.finishTerminals(t, env, l)
}

func TestTerminalsRefuseBadInput(t *testing.T) {
	t.Parallel()
	env, h, l := terminalLease(t, "")
	before := requestCount(env, "POST /toolbox/{sandboxId}/process/pty")

	_, rep := h.openLogin(l, "gemini", newSessionHome(t))
	assert.Equal(t, "LOGIN_PTY_DESCRIPTOR_REJECTED", errMessage(rep))
	_, rep = h.openLogin(l, "claude", "/tmp/paperclip-adapter-login/../../etc")
	assert.Equal(t, "LOGIN_PTY_DESCRIPTOR_REJECTED", errMessage(rep))
	_, rep = h.openLogin(lease{id: "no-such-sandbox"}, "claude", newSessionHome(t))
	assert.Equal(t, "Daytona login pseudo-terminal: no cached sandbox resolves the provider lease.", errMessage(rep))
	_, rep = h.openDuplex(lease{id: "no-such-sandbox"}, "cat")
	assert.Equal(t, "Daytona duplex channel: no cached sandbox resolves the provider lease.", errMessage(rep))
	_, rep = h.openDuplex(l)
	assert.Equal(t, "The duplex channel launch command needs at least one argument.", errMessage(rep))
	_, rep = h.openDuplex(l, "cat", "a\rb")
	assert.Contains(t, errMessage(rep), "control character")
	assert.Equal(t, before, requestCount(env, "POST /toolbox/{sandboxId}/process/pty"), "no PTY was created for a refused open")

	// Another company's lease does not resolve.
	wrong := duplexParams(l, "duplex-route-x", []string{"cat"})
	wrong["companyId"] = "c-2"
	assert.Equal(t, "Daytona duplex channel: no cached sandbox resolves the provider lease.",
		errMessage(h.call("duplexChannelOpen", wrong, newInvocation()).wait()))
	assert.Equal(t, "-32602", errCode(h.call("duplexChannelOpen", map[string]any{"hostRouteId": 7}, "").wait()))

	// Unknown sessions and routes.
	assert.Contains(t, errMessage(h.call("loginPtyInput", map[string]any{"workerSessionId": "pty-nope", "data": "x"}, "").wait()), "not open")
	assert.Contains(t, errMessage(h.call("loginPtyStop", map[string]any{"workerSessionId": "pty-nope"}, "").wait()), "not open")
	ack := h.call("loginPtyClose", map[string]any{"hostRouteId": "never-opened"}, "").wait()
	assert.Equal(t, map[string]any{"hostRouteId": "never-opened"}, ack.Result)
	ack = h.call("duplexChannelClose", map[string]any{"hostRouteId": "duplex-route-404"}, "").wait()
	assert.Equal(t, map[string]any{"hostRouteId": "duplex-route-404"}, ack.Result, "no session for a route never bound")

	// A live channel takes bytes only from its exact pair, well-formed and
	// within the host's write limit.
	r, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	other, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	write := func(id, sid, data string) reply {
		return h.call("duplexChannelWrite", map[string]any{"hostRouteId": id, "workerSessionId": sid, "data": data}, "").wait()
	}
	assert.Contains(t, errMessage(write(r.id, other.sid, "V1JPTkc=")), "is not open")
	assert.Contains(t, errMessage(write("duplex-route-404", r.sid, "V1JPTkc=")), "is not open")
	for _, bad := range []string{"", "V1JPTkc", "V1JPTkc=\n", "V1JP Tkc=", "V1JPTkd=", "V1JPTkc-", "!!!!"} {
		assert.Equal(t, "-32602", errCode(write(r.id, r.sid, bad)), "data %q", bad)
	}
	big := bytes.Repeat([]byte{'x'}, 262_145)
	assert.Contains(t, errMessage(write(r.id, r.sid, base64.StdEncoding.EncodeToString(big))), "more than the 262144")
	assert.Contains(t, errMessage(h.call("duplexChannelStop", map[string]any{"hostRouteId": r.id, "workerSessionId": other.sid}, "").wait()), "is not open")
	r.write([]byte("ok"))
	r.waitBytes(2)
	// A later byte would show anything refused above that reached cat.
	r.write([]byte("!"))
	r.waitBytes(3)
	assert.Equal(t, "ok!", string(r.bytes()))
	h.closeDuplex(r)
	h.closeDuplex(other)
	h.finishTerminals(t, env, l)
}

// Not parallel: megabytes through a terminal are thousands of 4 KiB round
// trips through the terminal driver, and under the race detector they would
// crowd out tests that wait on the clock. Three megabytes (more than the
// 1 MiB the test lets be on its way back) in make test, ten in make
// test-long.
func TestDuplexEchoesMegabytesThroughCat(t *testing.T) {
	env, h, l := terminalLease(t, "")
	r, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	assert.Regexp(t, `^duplex-[0-9a-f-]{36}$`, r.sid)
	size := 3 << 20
	if testutil.Long() {
		size = 10 << 20
	}
	payload := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	for b := range 256 { // every byte value, whatever the random bytes hold
		payload[b] = byte(b)
	}
	for off := 0; off < len(payload); {
		n := min(len(payload)-off, 1+rng.IntN(hostMaxDuplexChunk))
		// At most 1 MiB on its way back at a time, as a bridge's requests
		// and replies would be: the daemon drops a consumer that falls too
		// far behind, and on a loaded machine the way back is the slower.
		r.waitBytes(off - 1<<20)
		r.write(payload[off : off+n])
		off += n
	}
	r.waitBytes(len(payload))
	got := r.bytes()
	if !bytes.Equal(got, payload) {
		i := 0
		for i < min(len(got), len(payload)) && got[i] == payload[i] {
			i++
		}
		t.Fatalf("the echo differs from byte %d on (%d bytes back of %d)", i, len(got), len(payload))
	}
	h.mu.Lock()
	assert.Empty(t, r.writeErrors)
	t.Logf("10 MiB came back in %d notifications", r.chunks)
	h.mu.Unlock()
	h.closeDuplex(r)
	h.finishTerminals(t, env, l)
}

func TestStopAndCloseInEveryOrder(t *testing.T) {
	t.Parallel()
	env, h, l := terminalLease(t, "")

	stopReq := func(r *duplexRoute) request {
		return request{method: "duplexChannelStop", params: map[string]any{"hostRouteId": r.id, "workerSessionId": r.sid}}
	}
	// Stop, then close, in one write.
	a, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	a.write([]byte("a"))
	a.waitBytes(1)
	var stop *pending
	h.closeDuplexRequest(a, func(closeReq request) *pending {
		ps := h.send(stopReq(a), closeReq)
		stop = ps[0]
		return ps[1]
	}).check()
	assert.Nil(t, stop.wait().Error)

	// Close, then stop.
	b, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	c := h.closeDuplexRequest(b, func(closeReq request) *pending {
		ps := h.send(closeReq, stopReq(b))
		stop = ps[1]
		return ps[0]
	})
	c.check()
	assert.Nil(t, stop.wait().Error, "a stop after the close is not an error")

	// Writes, stop and close pipelined while data flows.
	d, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	d.write(bytes.Repeat([]byte("d"), 200_000))
	d.write(bytes.Repeat([]byte("e"), 200_000))
	h.closeDuplexRequest(d, func(closeReq request) *pending {
		return h.send(stopReq(d), closeReq)[1]
	}).check()

	// Stop alone: the exit (137) is reported, the route stays bound until
	// the host closes it, and then the bound session is acknowledged.
	e, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	require.Nil(t, h.send(stopReq(e))[0].wait().Error)
	code, transportClosed := e.waitExit()
	require.NotNil(t, code)
	assert.Equal(t, 137, *code)
	assert.False(t, transportClosed)
	h.closeDuplex(e)

	// The host gives up on an open (its timeout) and closes the route
	// before the reply: the worker abandons the channel and emits nothing
	// for a route the host no longer knows.
	f := h.newDuplexRoute()
	open := h.send(h.openDuplexRequest(f, l, []string{"cat"}))[0]
	h.closeDuplex(f)
	_ = open.wait()

	// Login: stop and close pipelined, then close and input.
	g, rep := h.openLogin(l, "claude", newSessionHome(t))
	require.Nil(t, rep.Error)
	g.waitText("Paste code here")
	h.mu.Lock()
	g.state = "closed"
	delete(h.terms.logins, g.id)
	h.mu.Unlock()
	ps := h.send(request{method: "loginPtyStop", params: map[string]any{"workerSessionId": g.sid}},
		request{method: "loginPtyClose", params: map[string]any{"hostRouteId": g.id}},
		request{method: "loginPtyInput", params: map[string]any{"workerSessionId": g.sid, "data": "x\r"}})
	assert.Equal(t, map[string]any{"hostRouteId": g.id}, ps[1].waitFor(10*time.Second).Result)
	ps[0].wait()
	ps[2].wait()

	// Login stop alone: the CLI is killed and its exit (137) reported; the
	// close afterwards is acknowledged as usual.
	k, rep := h.openLogin(l, "claude", newSessionHome(t))
	require.Nil(t, rep.Error)
	k.waitText("Paste code here")
	require.Nil(t, k.stop().Error)
	loginCode := k.waitExit()
	require.NotNil(t, loginCode, "a stopped login reports an exit code")
	assert.Equal(t, 137, *loginCode)
	h.closeLogin(k)

	assert.True(t, testutil.Eventually(30*time.Second, func() bool { return sandboxView(t, env, l.id).PTYs == 0 }),
		"every PTY is gone: %d left", sandboxView(t, env, l.id).PTYs)
	h.finishTerminals(t, env, l)
}

func TestReleaseClosesTheLeaseTerminals(t *testing.T) {
	t.Parallel()
	env, h, l := terminalLease(t, "")
	other := h.acquire(leaseConfig(env, ""))

	d, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	lg, rep := h.openLogin(l, "claude", newSessionHome(t))
	require.Nil(t, rep.Error)
	lg.waitText("Paste code here")
	keep, rep := h.openDuplex(other, "cat")
	require.Nil(t, rep.Error)

	rel := h.call("environmentReleaseLease", h.releaseParams(l, nil), newInvocation()).wait()
	require.Nil(t, rel.Error, "release: %v", rel.Error)
	// Both terminals report their end; the host still has them bound.
	code, transportClosed := d.waitExit()
	assert.True(t, transportClosed || (code != nil && *code == 137), "duplex exit %v/%v", code, transportClosed)
	lg.waitExit()
	// The host's close after the teardown still gets the bound session.
	h.closeDuplex(d)
	h.closeLogin(lg)
	// The released lease takes no new terminal: its handle is gone, as in
	// the plugin, whose teardown evicts it.
	_, rep = h.openDuplex(l, "cat")
	assert.Equal(t, "Daytona duplex channel: no cached sandbox resolves the provider lease.", errMessage(rep))
	_, rep = h.openLogin(l, "claude", newSessionHome(t))
	assert.Equal(t, "Daytona login pseudo-terminal: no cached sandbox resolves the provider lease.", errMessage(rep))
	// The other lease's channel is untouched.
	keep.write([]byte("still here"))
	keep.waitBytes(10)
	assert.Equal(t, "still here", string(keep.bytes()))
	h.closeDuplex(keep)
	h.checkTerminals(t)
	finish(t, h, env, other)
}

func TestChannelOpenAcrossALeaseRelease(t *testing.T) {
	t.Parallel()
	for _, cancelActive := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancelActiveWork=%v", cancelActive), func(t *testing.T) {
			t.Parallel()
			env := startEmulator(t, emulator.Options{})
			h := startHost(t, hostOptions{})
			l := h.acquire(leaseConfig(env, ""))
			// The terminal's shell takes a second to start, so the release
			// lands while the open is in flight.
			home := sandboxView(t, env, l.id).HomeDir
			require.NoError(t, os.WriteFile(filepath.Join(home, ".bash_profile"), []byte("sleep 1\n"), 0o644))
			r := h.newDuplexRoute()
			open := h.send(h.openDuplexRequest(r, l, []string{"cat"}))[0]
			require.True(t, testutil.Eventually(30*time.Second, func() bool { return sandboxView(t, env, l.id).PTYs > 0 }), "the open reached the sandbox")
			rel := h.call("environmentReleaseLease", h.releaseParams(l, map[string]any{"cancelActiveWork": cancelActive}), newInvocation()).wait()
			require.Nil(t, rel.Error, "release: %v", rel.Error)
			rep := open.wait()
			h.afterDuplexOpen(r, rep)
			if rep.Error == nil {
				// A graceful release waits for the open, then ends the channel.
				r.waitExit()
				h.closeDuplex(r)
			}
			t.Logf("open: %v", errMessage(rep))
			h.checkTerminals(t)
			if cancelActive {
				finish(t, h, env, l) // a cancelling release stops the sandbox and keeps it
			} else {
				finish(t, h, env)
			}
		})
	}
}

func TestTerminalsOpenAfterAWorkerRestart(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	first := startHost(t, hostOptions{})
	l := first.acquire(leaseConfig(env, ""))
	installStandIns(t, env, l)
	// The worker dies; the host starts another, which has cached nothing.
	first.hangUp()

	h := startHost(t, hostOptions{env: []string{"DAYTONA_API_KEY=" + env.APIKey, "DAYTONA_API_URL=" + env.APIURL}})
	r, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error, "open after a restart: %v", rep.Error)
	r.write([]byte("after restart"))
	r.waitBytes(13)
	assert.Equal(t, "after restart", string(r.bytes()))
	lg, rep := h.openLogin(l, "codex", newSessionHome(t))
	require.Nil(t, rep.Error, "login open after a restart: %v", rep.Error)
	lg.waitExit()
	// The lease still belongs to its company and environment only.
	wrong := loginParams(l, uuid.NewString(), "claude", newSessionHome(t))
	wrong["environmentId"] = "env-2"
	assert.Equal(t, "Daytona login pseudo-terminal: no cached sandbox resolves the provider lease.",
		errMessage(h.call("loginPtyOpen", wrong, newInvocation()).wait()))
	h.closeDuplex(r)
	h.closeLogin(lg)
	h.finishTerminals(t, env, l)
}

func TestShutdownEndsEveryTerminal(t *testing.T) {
	t.Parallel()
	env, h, l := terminalLease(t, "")
	token := uniqueSleep(300)
	_, rep := h.openDuplex(l, "sleep", token)
	require.Nil(t, rep.Error)
	lg, rep := h.openLogin(l, "claude", newSessionHome(t))
	require.Nil(t, rep.Error)
	lg.waitText("Paste code here")
	h.shutdown()
	assertNoProcessWith(t, token)
	assert.True(t, testutil.Eventually(30*time.Second, func() bool { return sandboxView(t, env, l.id).PTYs == 0 }), "PTYs left after shutdown")
	// The worker is gone; a fresh one cleans the sandbox up.
	h2 := startHost(t, hostOptions{})
	finish(t, h2, env, l)
}

// TestClosesAreAcknowledgedWhileTheShutdownDrains: the host retires (kills)
// a worker that does not acknowledge the close of a login PTY or a duplex
// channel, and it may close one while it stops the worker (a login that
// just ended, a run torn down). Those closes are answered during the drain,
// as the official runtime serves requests while its shutdown hook runs, so
// the drain (here held by a command in flight) is not cut short.
func TestClosesAreAcknowledgedWhileTheShutdownDrains(t *testing.T) {
	t.Parallel()
	env, h, l := terminalLease(t, "")
	lg, rep := h.openLogin(l, "claude", newSessionHome(t))
	require.Nil(t, rep.Error)
	lg.waitText("Paste code here")
	d, rep := h.openDuplex(l, "cat")
	require.Nil(t, rep.Error)
	token := uniqueSleep(30)
	running, inv := h.start(l, cmdSpec{command: "sleep", args: []string{token}})
	require.True(t, testutil.Eventually(30*time.Second, func() bool { return len(processesWith(token)) > 0 }), "the command runs")

	h.mu.Lock()
	lg.state = "closed"
	delete(h.terms.logins, lg.id)
	bound := d.sid
	delete(h.terms.live, pairKey(d.id, d.sid))
	h.terms.tombstones[pairKey(d.id, d.sid)] = true
	d.state = "closed"
	h.mu.Unlock()
	ps := h.send(request{method: "shutdown", params: map[string]any{}},
		request{method: "loginPtyClose", params: map[string]any{"hostRouteId": lg.id}},
		request{method: "duplexChannelClose", params: map[string]any{"hostRouteId": d.id}},
		request{method: "health", params: map[string]any{}})
	loginAck := ps[1].waitFor(10 * time.Second)
	assert.Nil(t, loginAck.Error, "the login close during the drain")
	assert.Equal(t, map[string]any{"hostRouteId": lg.id}, loginAck.Result)
	duplexAck := ps[2].waitFor(10 * time.Second)
	assert.Nil(t, duplexAck.Error, "the duplex close during the drain")
	assert.Equal(t, map[string]any{"hostRouteId": d.id, "workerSessionId": bound}, duplexAck.Result)
	assert.Equal(t, "-32000", errCode(ps[3].wait()), "other requests are refused while the worker shuts down")
	assert.Nil(t, ps[0].wait().Error, "the shutdown")
	_ = h.result(running, inv)

	assert.Equal(t, 0, h.hangUp())
	assert.True(t, testutil.Eventually(30*time.Second, func() bool { return sandboxView(t, env, l.id).PTYs == 0 }), "PTYs left after shutdown")
	h.checkTerminals(t)
	// A fresh worker cleans up (the destroy also ends the command the
	// shutdown gave up on).
	h2 := startHost(t, hostOptions{})
	finish(t, h2, env, l)
}

func TestASignalEndsTheTerminalsToo(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	p := startWorker(t, nil)
	h := newHost(t, p, p.Stdout(), hostOptions{})
	l := h.acquire(leaseConfig(env, ""))
	token := uniqueSleep(300)
	_, rep := h.openDuplex(l, "sleep", token)
	require.Nil(t, rep.Error)
	require.NoError(t, p.Signal(syscall.SIGTERM))
	code := waitExit(t, p)
	assert.Equal(t, 0, code)
	assertNoProcessWith(t, token)
	h2 := startHost(t, hostOptions{})
	finish(t, h2, env, l)
}

// TestEveryTeardownEndsTheLeaseTerminals: whatever ends a lease (a stop, a
// destroy, a cancelling release, or a resume of a sandbox that stopped
// meanwhile) ends its login PTYs and duplex channels with an exit the host
// is told of, and the host's close afterwards still gets the bound session.
func TestEveryTeardownEndsTheLeaseTerminals(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"stop", "destroy", "release-cancelling", "resume-after-autostop"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			env, h, l := terminalLease(t, `,"reuseLease":true`)
			d, rep := h.openDuplex(l, "cat")
			require.Nil(t, rep.Error)
			lg, rep := h.openLogin(l, "claude", newSessionHome(t))
			require.Nil(t, rep.Error)
			lg.waitText("Paste code here")

			var res reply
			keep := true // the sandbox outlives the teardown
			switch how {
			case "stop":
				res = h.call("environmentStopLease", h.releaseParams(l, nil), newInvocation()).wait()
			case "destroy":
				res = h.call("environmentDestroyLease", h.releaseParams(l, nil), newInvocation()).wait()
				keep = false
			case "release-cancelling":
				res = h.call("environmentReleaseLease", h.releaseParams(l, map[string]any{"cancelActiveWork": true}), newInvocation()).wait()
			case "resume-after-autostop":
				require.NoError(t, env.Server.StopBehindClientsBack(l.id))
				p := baseParams(l.cfg)
				p["providerLeaseId"] = l.id
				p["leaseMetadata"] = map[string]any{}
				res = h.call("environmentResumeLease", p, newInvocation()).wait()
			}
			require.Nil(t, res.Error, "%s: %v", how, res.Error)
			d.waitExit()
			lg.waitExit()
			h.closeDuplex(d)
			h.closeLogin(lg)
			assert.True(t, testutil.Eventually(30*time.Second, func() bool {
				v, ok := env.Server.Sandbox(l.id)
				return !ok || v.PTYs == 0
			}), "PTYs left after the %s", how)
			if how == "resume-after-autostop" {
				// The resumed lease takes terminals again.
				again, rep := h.openDuplex(l, "cat")
				require.Nil(t, rep.Error, "open after the resume: %v", rep.Error)
				again.write([]byte("back"))
				again.waitBytes(4)
				h.closeDuplex(again)
			}
			h.checkTerminals(t)
			if keep {
				finish(t, h, env, l)
			} else {
				finish(t, h, env)
			}
		})
	}
}

// gateReader is the host's end of the worker's stdout, which the test can
// stop reading for a while (a host too busy to read).
type gateReader struct {
	r    io.Reader
	mu   sync.Mutex
	open chan struct{} // closed while reading is allowed
}

func newGateReader(r io.Reader) *gateReader {
	g := &gateReader{r: r, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gateReader) Read(p []byte) (int, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	<-open
	return g.r.Read(p)
}

func (g *gateReader) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gateReader) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

// TestAHostThatStopsReadingHoldsTheWorkerToItsBound: while the host does not
// read, a command floods its channel; the worker stops reading the PTY
// socket instead of buffering, so its memory stays flat (the daemon then
// drops a consumer that slow, or the command finishes once the host reads
// again).
func TestAHostThatStopsReadingHoldsTheWorkerToItsBound(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{})
	p := startWorker(t, nil)
	gate := newGateReader(p.Stdout())
	h := newHost(t, p, gate, hostOptions{})
	l := h.acquire(leaseConfig(env, ""))
	const flood = 32 << 20
	size := flood + rand.IntN(1000) // a head command line we can find in /proc
	token := "head -c " + strconv.Itoa(size)
	r, rep := h.openDuplex(l, "sh", "-c", "read go && exec "+token+" /dev/zero")
	require.Nil(t, rep.Error)
	_, before := workerMemory(t, p)
	gate.pause()
	r.write([]byte("go\n")) // its reply waits in the pipe with the rest
	// The flood is over when head has written it all (to a worker that
	// read it, or to a daemon that dropped a consumer that slow), or when
	// head sleeps in a write behind the worker's bound.
	require.True(t, testutil.Eventually(90*time.Second, func() bool {
		procs := processesWith(token)
		return len(procs) == 0 || asleep(procs)
	}), "the flood neither ended nor stalled")
	peak, _ := workerMemory(t, p)
	t.Logf("worker RSS %.1f MiB before, peak %.1f MiB while %d MiB were pushed at it", before, peak, flood>>20)
	assert.Less(t, peak-before, 16.0, "the worker's memory grew with what the host did not read")
	gate.resume()
	code, transportClosed := r.waitExit()
	got := len(r.bytes())
	t.Logf("received %d of %d bytes, exit %v, transport closed %v", got, size, code, transportClosed)
	assert.True(t, transportClosed || (code != nil && *code == 0 && got == size), "either every byte or a transport close")
	h.closeDuplex(r)
	h.finishTerminals(t, env, l)
}

// asleep reports whether every listed process sleeps.
func asleep(procs []string) bool {
	for _, p := range procs {
		pid, _, _ := strings.Cut(p, ":")
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		if state := string(stat[bytes.LastIndexByte(stat, ')')+2:]); !strings.HasPrefix(state, "S") {
			return false
		}
	}
	return true
}

// workerMemory is the worker's peak and current resident memory in MiB.
func workerMemory(t *testing.T, p *workerhost.Process) (peak, rss float64) {
	peak, rss, err := p.Memory()
	if err != nil {
		t.Skip("no /proc on this system")
	}
	return peak, rss
}
