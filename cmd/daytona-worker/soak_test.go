package main

// TestSoak is a chaos and soak test: the real worker binary against the
// emulator, driven by a seeded random mix of what the host does (leases
// acquired, resumed, released, stopped and destroyed; executes in a session
// and one-shot, with stdin, env, timeouts, large and binary output; sync in
// and out; login PTYs and duplex channels; malformed lines, unknown
// methods; shutdowns and restarts of the worker) while the emulator injects
// random faults (5xx, a proxy's HTML 502, connection resets mid-answer,
// slow bodies, latency, dropped WebSockets, late exit codes, rate limits).
//
// Invariants, checked throughout:
//   - every request gets exactly one reply, with its id, before the worker
//     exits; every line the worker writes is one JSON-RPC message;
//   - lines that are not requests get their one id-null error;
//   - no execute.log after its execute was answered, no terminal frame
//     after its exit or after its close was acknowledged, frames only for
//     routes the host opened, with the session the open bound;
//   - an execute's streamed output is its result's output; when no fault
//     hit its sandbox while it ran, the result is exactly what the command
//     prints (Node's UTF-8 decoding of it); a command that reports its
//     expected exit code under faults still has its whole text output;
//   - a call that no fault touched succeeds;
//   - the worker always answers health within a bound;
//   - once a release, stop or destroy succeeded, the sandbox runs nothing
//     (it is gone, or stopped with no process);
//   - at the end, with every lease destroyed and the HTTP connections
//     closed from the emulator's side, the worker's goroutines and file
//     descriptors are back to what they were after a warm-up; after the
//     shutdown the emulator has no sandbox and no process left.
//
// In CI it runs one seed for a few dozen actions. Locally:
//
//	DAYTONA_SOAK_SEED=7 DAYTONA_SOAK_SEEDS=50 DAYTONA_SOAK_STEPS=40 \
//	  go test -run TestSoak -timeout 0 ./cmd/daytona-worker/
//
// DAYTONA_SOAK_LANES sets how many hosts' worth of work run at once (3),
// DAYTONA_SOAK_FAULT_GAP_MS about how long passes between two faults (300),
// DAYTONA_SOAK_RESTART_GAP after how many actions the worker is stopped and
// replaced (40; once in CI),
// DAYTONA_SOAK_SLOW_FAULTS=1 adds the faults that cost a watchdog or a
// liveness timeout (a half-open log stream, a hung control plane). A
// failure names its seed; the same seed replays the same plan of actions
// and faults (the interleaving is the machine's).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/testutil"
	"github.com/paperclipai/daytona-worker/internal/utf8text"
	"github.com/paperclipai/daytona-worker/protocol"
)

// ---- settings ----

type soakSettings struct {
	firstSeed  uint64
	seeds      int
	steps      int // actions per lane
	lanes      int
	faultGap   int // milliseconds, about, between two faults
	restartGap int // lane actions, about, between two restarts in a long run
	slowFaults bool
}

// What CI runs: one seed, three lanes of eight actions.
const (
	soakCISteps = 8
	soakCILanes = 3
)

func soakSettingsFromEnv(t *testing.T) soakSettings {
	s := soakSettings{firstSeed: 1, seeds: 1, steps: soakCISteps, lanes: soakCILanes, faultGap: 300, restartGap: 40}
	for _, v := range []struct {
		name string
		into *int
	}{{"DAYTONA_SOAK_SEEDS", &s.seeds}, {"DAYTONA_SOAK_STEPS", &s.steps}, {"DAYTONA_SOAK_LANES", &s.lanes}, {"DAYTONA_SOAK_FAULT_GAP_MS", &s.faultGap}, {"DAYTONA_SOAK_RESTART_GAP", &s.restartGap}} {
		if text := os.Getenv(v.name); text != "" {
			n, err := strconv.Atoi(text)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", v.name, text)
			}
			*v.into = n
		}
	}
	if text := os.Getenv("DAYTONA_SOAK_SEED"); text != "" {
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			t.Fatalf("DAYTONA_SOAK_SEED=%q: want a number", text)
		}
		s.firstSeed = n
	}
	s.slowFaults = os.Getenv("DAYTONA_SOAK_SLOW_FAULTS") == "1"
	return s
}

func (s soakSettings) long() bool { return s.steps > soakCISteps }

// buildSoakWorker builds the worker with its soak-only goroutine dump
// (soakdebug.go).
func buildSoakWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "daytona-worker-soak")
	args := []string{"build", "-tags", "soakdebug", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("building the soak worker: %v\n%s", err, out)
	}
	return bin
}

func TestSoak(t *testing.T) {
	t.Parallel()
	set := soakSettingsFromEnv(t)
	bin := buildSoakWorker(t)
	for i := 0; i < set.seeds; i++ {
		seed := set.firstSeed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runSoak(t, bin, seed, set)
		})
	}
}

// ---- the run ----

type soakRun struct {
	t    *testing.T
	seed uint64
	set  soakSettings
	env  *emulatorEnv
	bin  string
	dump string // where the worker writes its goroutine dump

	gate  sync.RWMutex // read-held around every send; a restart holds it to swap workers
	cur   *soakHost
	epoch atomic.Int32

	progress atomic.Int64 // lane actions done
	// How many executes were checked exactly, with no fault, and whole
	// under a fault; how many failed under one.
	exactChecks, faultChecks, faultFailures atomic.Int64
	stop                                    chan struct{}

	mu       sync.Mutex
	failures []string
	trace    []string
	live     map[string]bool // sandboxes of live leases, for faults to aim at
	started  time.Time
}

func (r *soakRun) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, msg)
	r.trace = append(r.trace, fmt.Sprintf("%8.3fs FAIL %s", time.Since(r.started).Seconds(), msg))
}

func (r *soakRun) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trace = append(r.trace, fmt.Sprintf("%8.3fs %s", time.Since(r.started).Seconds(), fmt.Sprintf(format, args...)))
}

func (r *soakRun) host() *soakHost {
	r.gate.RLock()
	defer r.gate.RUnlock()
	return r.cur
}

// send sends a request to the current worker.
func (r *soakRun) send(method string, params any, inv string, onReply func(soakReply)) (*soakHost, *soakCall, error) {
	r.gate.RLock()
	defer r.gate.RUnlock()
	h := r.cur
	c, err := h.call(method, params, inv, onReply)
	return h, c, err
}

// outcome is one call's reply and what could excuse its failure.
type outcome struct {
	h     *soakHost
	c     *soakCall
	rep   soakReply
	err   error // no reply (already reported)
	sbID  string
	delta time.Duration
}

// faulted reports whether a fault hit the sandbox (or, with sandboxID "",
// anything) between the call's send and its reply, or the worker it went
// to is no longer the current one.
func (r *soakRun) faulted(sandboxID string, from, to time.Time) bool {
	for _, hit := range r.env.Server.FaultHits() {
		if hit.At.Before(from) || hit.At.After(to) {
			continue
		}
		if sandboxID == "" || hit.SandboxID == "" || hit.SandboxID == sandboxID {
			return true
		}
	}
	return false
}

func (o outcome) excused(r *soakRun) bool {
	return o.h.stopping.Load() || r.faulted(o.sbID, o.c.sent, o.rep.At)
}

// do sends a request and waits up to d for its reply. A call with no reply
// is a failure; the returned outcome then has err set.
func (r *soakRun) do(method string, params any, inv, sandboxID string, d time.Duration, onReply func(soakReply)) outcome {
	return r.doPinned(nil, method, params, inv, sandboxID, d, onReply)
}

// errRestarted: the call was for a worker that has been replaced.
var errRestarted = errors.New("the worker was restarted")

// doPinned is do for a call that only makes sense to the worker pin (a
// terminal's): if another worker serves now, nothing is sent.
func (r *soakRun) doPinned(pin *soakHost, method string, params any, inv, sandboxID string, d time.Duration, onReply func(soakReply)) outcome {
	r.gate.RLock()
	h := r.cur
	if pin != nil && pin != h {
		r.gate.RUnlock()
		return outcome{h: pin, err: errRestarted}
	}
	c, err := h.call(method, params, inv, onReply)
	r.gate.RUnlock()
	if err != nil {
		if !h.stopping.Load() {
			r.fail("writing %s to worker %d: %v", method, h.epoch, err)
		}
		return outcome{h: h, err: err}
	}
	rep, err := c.wait(d)
	o := outcome{h: h, c: c, rep: rep, err: err, sbID: sandboxID, delta: rep.At.Sub(c.sent)}
	switch {
	case err != nil && !errors.Is(err, errNoReply):
		r.fail("worker %d: %v", h.epoch, err)
	case err != nil:
		r.note("worker %d: %s %s %s (%s): %v", h.epoch, method, c.id, sandboxID, inv, err)
	case rep.Error != nil:
		r.note("worker %d: %s %s %s (%s) failed in %s: %s", h.epoch, method, c.id, sandboxID, inv, o.delta.Round(time.Millisecond), truncate(rep.Error.String(), 300))
	default:
		r.note("worker %d: %s %s %s (%s) answered in %s", h.epoch, method, c.id, sandboxID, inv, o.delta.Round(time.Millisecond))
	}
	return o
}

func runSoak(t *testing.T, bin string, seed uint64, set soakSettings) {
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	opts := emulator.Options{
		StepDelay:     []time.Duration{emulator.Synchronous, 5 * time.Millisecond, 30 * time.Millisecond}[rng.IntN(3)],
		LogFrameSize:  []int{0, 64, 333}[rng.IntN(3)],
		LogFrameSplit: emulator.SplitRandom(seed, 1+rng.IntN(700)),
	}
	r := &soakRun{t: t, seed: seed, set: set, bin: bin, env: startEmulator(t, opts), live: map[string]bool{},
		dump: filepath.Join(t.TempDir(), "goroutines.txt"), stop: make(chan struct{}), started: time.Now()}
	t.Logf("seed %d: %d lanes × %d actions, emulator %+v", seed, set.lanes, set.steps, opts)
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.failures) == 0 {
			return
		}
		for _, f := range r.failures {
			t.Errorf("seed %d: %s", seed, f)
		}
		tail := r.trace
		if f, err := os.CreateTemp("", fmt.Sprintf("daytona-soak-seed-%d-*.trace", seed)); err == nil {
			_, _ = f.WriteString(strings.Join(r.trace, "\n") + "\n")
			_ = f.Close()
			t.Logf("seed %d: the whole trace is in %s", seed, f.Name())
		}
		if len(tail) > 400 {
			tail = tail[len(tail)-400:]
		}
		t.Logf("seed %d: the run's last events:\n%s", seed, strings.Join(tail, "\n"))
		t.Logf("reproduce: DAYTONA_SOAK_SEED=%d DAYTONA_SOAK_STEPS=%d DAYTONA_SOAK_LANES=%d go test -run 'TestSoak/seed=%d$' ./cmd/daytona-worker/",
			seed, set.steps, set.lanes, seed)
	}()

	r.cur = r.startWorker(0)
	if r.cur == nil {
		return
	}
	r.warmUp()
	base, ok := r.resources(r.cur, nil)
	if !ok {
		return
	}

	lanes := make([]*soakLane, set.lanes)
	var wg sync.WaitGroup
	for i := range lanes {
		lanes[i] = &soakLane{r: r, n: i, rng: rand.New(rand.NewPCG(seed, uint64(i+1))), dir: t.TempDir()}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lanes[i].run()
		}()
	}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); r.chaos(rand.New(rand.NewPCG(seed, 0xc4a05))) }()
	go func() { defer bg.Done(); r.noise(rand.New(rand.NewPCG(seed, 0x4015e))) }()
	restarts := r.planRestarts(rng)
	how := make([]string, len(restarts))
	for i := range how {
		how[i] = []string{"shutdown", "shutdown", "shutdown", "eof", "sigterm"}[rng.IntN(5)]
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i, at := range restarts {
			for r.progress.Load() < at {
				select {
				case <-r.stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			r.restart(how[i])
		}
	}()
	wg.Wait()
	close(r.stop)
	bg.Wait()

	r.env.Server.ClearFaults()
	r.note("quiescing")
	for _, l := range lanes {
		l.cleanUp()
	}
	r.checkNoSandboxes("after destroying every lease")
	end, _ := r.resources(r.cur, &base)
	t.Logf("seed %d: worker %d holds %d descriptors and %d goroutines (%d and %d after the warm-up)", seed, r.cur.epoch,
		end.total(end.fds), end.total(end.goroutines), base.total(base.fds), base.total(base.goroutines))
	r.shutdown(r.cur)
	r.checkNoSandboxes("after the shutdown")
	if !testutil.Eventually(10*time.Second, func() bool { return r.env.Server.LiveProcesses() == 0 }) {
		r.fail("%d emulator processes still alive after the shutdown", r.env.Server.LiveProcesses())
	}
	t.Logf("seed %d: %d actions, %d restarts, %d fault hits, executes checked exactly %d, whole under a fault %d, failed under a fault %d, %s",
		seed, r.progress.Load(), len(restarts), len(r.env.Server.FaultHits()), r.exactChecks.Load(), r.faultChecks.Load(), r.faultFailures.Load(),
		time.Since(r.started).Round(time.Millisecond))
}

// planRestarts says after how many lane actions the worker is shut down
// and a new one started: once in CI, about every restartGap actions in a
// long run.
func (r *soakRun) planRestarts(rng *rand.Rand) []int64 {
	total := int64(r.set.steps * r.set.lanes)
	n := 1
	if r.set.long() {
		n = int(total) / r.set.restartGap
	}
	var at []int64
	for i := 0; i < n; i++ {
		at = append(at, 1+rng.Int64N(max(total-1, 1)))
	}
	slices.Sort(at)
	return at
}

func (r *soakRun) startWorker(epoch int) *soakHost {
	// The account of the leases, as a deployment configures it, so that a
	// terminal opened after a restart finds its sandbox.
	p := startWorkerBinary(r.t, r.bin, []string{"DAYTONA_WORKER_SOAK_DUMP=" + r.dump, "DAYTONA_WORKER_LOG_LEVEL=debug",
		"DAYTONA_API_KEY=" + r.env.APIKey, "DAYTONA_API_URL=" + r.env.APIURL})
	h := newSoakHost(r, p, epoch)
	o := r.doOn(h, protocol.MethodInitialize, map[string]any{"manifest": map[string]any{}, "config": map[string]any{},
		"instanceInfo": map[string]any{"instanceId": "soak", "hostVersion": "1"}, "apiVersion": 1}, 30*time.Second)
	if o.err != nil || o.rep.Error != nil {
		r.fail("initialize of worker %d: %v %s", epoch, o.err, o.rep.Error)
		return nil
	}
	return h
}

// doOn is do on a given worker (start-up and shutdown, outside the gate).
func (r *soakRun) doOn(h *soakHost, method string, params any, d time.Duration) outcome {
	c, err := h.call(method, params, "", nil)
	if err != nil {
		r.fail("writing %s to worker %d: %v", method, h.epoch, err)
		return outcome{h: h, err: err}
	}
	rep, err := c.wait(d)
	if err != nil && !errors.Is(err, errNoReply) {
		r.fail("worker %d: %v", h.epoch, err)
	}
	return outcome{h: h, c: c, rep: rep, err: err}
}

// restart stops the current worker while work is in flight, as the host
// does (a shutdown request, mostly; or the end of its input, or SIGTERM),
// checks how it went, and starts the next one.
func (r *soakRun) restart(how string) {
	r.gate.Lock()
	defer r.gate.Unlock()
	old := r.cur
	r.note("restart: stopping worker %d (%s)", old.epoch, how)
	old.stopping.Store(true)
	r.stopWorker(old, how)
	next := r.startWorker(old.epoch + 1)
	if next == nil {
		return
	}
	r.cur = next
	r.epoch.Store(int32(next.epoch))
	r.note("restart: worker %d serving", next.epoch)
}

// shutdown stops h with a shutdown request.
func (r *soakRun) shutdown(h *soakHost) { r.stopWorker(h, "shutdown") }

// stopWorker stops h: a shutdown request must be answered after every
// request before it; after SIGTERM or at the end of input requests still
// unread are dropped (as the Node worker drops them), so only a prompt,
// clean exit counts. In every
// case the worker exits 0, within the host's drain, and what it wrote was
// whole lines.
func (r *soakRun) stopWorker(h *soakHost, how string) {
	start := time.Now()
	switch how {
	case "shutdown":
		// The host's shutdown drain is 10 s; the worker promises its reply within 7.5 s.
		o := r.doOn(h, protocol.MethodShutdown, map[string]any{}, 15*time.Second)
		if o.err == nil && o.rep.Error != nil {
			r.fail("worker %d: shutdown answered %s", h.epoch, o.rep.Error)
		}
		if left := h.unanswered(); len(left) > 0 {
			r.fail("worker %d answered shutdown before %d requests: %s", h.epoch, len(left), strings.Join(left, "; "))
		}
		_ = h.p.CloseStdin()
	case "sigterm":
		// Requests still in the pipe when the signal lands are never read:
		// only what was read is answered, and that cannot be told apart here.
		h.mu.Lock()
		h.deaf = true
		h.mu.Unlock()
		if err := h.p.Signal(syscall.SIGTERM); err != nil {
			r.fail("worker %d: SIGTERM: %v", h.epoch, err)
		}
	case "eof":
		h.mu.Lock()
		h.deaf = true // the host that closes the worker's input reads no more replies
		h.mu.Unlock()
		_ = h.p.CloseStdin()
	}
	select {
	case <-h.conn.Done():
	case <-time.After(15 * time.Second):
		r.fail("worker %d did not close stdout within 15 s of its %s", h.epoch, how)
		_ = h.p.Close()
		<-h.conn.Done()
	}
	h.ended()
	code, err := h.p.Wait(context.Background())
	if err != nil || code != 0 {
		r.fail("worker %d exited with %d (%v) after its %s", h.epoch, code, err, how)
	}
	// The host sends SIGKILL 5 s after its 10 s drain.
	if took := time.Since(start); took > 15*time.Second {
		r.fail("worker %d took %s to exit after its %s", h.epoch, took.Round(time.Millisecond), how)
	}
	h.mu.Lock()
	if h.nullReplies != h.nullExpected && how == "shutdown" {
		r.fail("worker %d: %d replies with id null for %d lines that were not requests", h.epoch, h.nullReplies, h.nullExpected)
	}
	h.mu.Unlock()
	if stderr := h.p.Stderr(); strings.Contains(stderr, "DATA RACE") || strings.Contains(stderr, "panic") {
		r.fail("worker %d stderr reports a race or a panic:\n%s", h.epoch, grepLines(stderr, "DATA RACE", "panic", "goroutine ", ".go:"))
	}
}

func grepLines(s string, words ...string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				out = append(out, line)
				break
			}
		}
		if len(out) > 200 {
			break
		}
	}
	return strings.Join(out, "\n")
}

// warmUp runs one lease through what the lanes do, without faults, so the
// baseline holds whatever the worker creates once and keeps (its HTTP
// client, its terminal manager).
func (r *soakRun) warmUp() {
	l := &soakLane{r: r, n: -1, rng: rand.New(rand.NewPCG(r.seed, 0x3a)), dir: r.t.TempDir()}
	l.acquire()
	if l.lease == nil {
		r.fail("warm-up: no lease")
		return
	}
	l.executeOne(soakCmd{spec: cmdSpec{command: "echo", args: []string{"warm"}}, stdout: "warm\n", exact: true, text: true})
	l.executeOne(soakCmd{spec: cmdSpec{command: "echo", args: []string{"warm"}, bypass: true}, stdout: "warm\n", exact: true, text: true})
	l.duplex()
	l.login()
	l.syncRoundTrip()
	l.teardown("environmentDestroyLease", false)
}

// checkNoSandboxes fails for every sandbox the emulator still holds.
func (r *soakRun) checkNoSandboxes(when string) {
	if err := waitForNoSandboxes(r.env, 20*time.Second); err != nil {
		r.fail("%s: %v", when, err)
	}
}

// ---- resources ----

type soakResources struct {
	fds        map[string]int // by kind
	goroutines map[string]int // by stack
}

// total counts m's entries, less the rpc goroutines parked for a next
// request (rpc keeps up to maxWaitingServers of them, by design).
func (s soakResources) total(m map[string]int) int {
	n := 0
	for k, v := range m {
		if strings.HasSuffix(k, "rpc.(*Conn).serve") {
			continue
		}
		n += v
	}
	return n
}

// resources measures the worker's goroutines and descriptors once the
// emulator has closed its side of every HTTP connection; with a baseline,
// it waits for them to come back to it and reports what stayed.
func (r *soakRun) resources(h *soakHost, base *soakResources) (soakResources, bool) {
	var got soakResources
	var err error
	settled := testutil.Eventually(20*time.Second, func() bool {
		r.env.HTTP.CloseClientConnections()
		got, err = r.measure(h)
		if err != nil {
			return false
		}
		if base == nil {
			return true
		}
		return got.total(got.fds) <= got.total(base.fds) && got.total(got.goroutines) <= got.total(base.goroutines)
	})
	if err != nil {
		r.fail("measuring worker %d: %v", h.epoch, err)
		return got, false
	}
	if base != nil && !settled {
		r.fail("worker %d holds %d descriptors and %d goroutines, %d and %d after the warm-up:\n%s",
			h.epoch, got.total(got.fds), got.total(got.goroutines), got.total(base.fds), got.total(base.goroutines), diffCounts(base, got))
	}
	return got, true
}

func diffCounts(base *soakResources, got soakResources) string {
	var out []string
	for _, pair := range []struct {
		what      string
		was, now_ map[string]int
	}{{"fd", base.fds, got.fds}, {"goroutines", base.goroutines, got.goroutines}} {
		keys := map[string]bool{}
		for k := range pair.was {
			keys[k] = true
		}
		for k := range pair.now_ {
			keys[k] = true
		}
		var sorted []string
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if pair.now_[k] != pair.was[k] {
				out = append(out, fmt.Sprintf("%s %d → %d: %s", pair.what, pair.was[k], pair.now_[k], k))
			}
		}
	}
	return strings.Join(out, "\n")
}

func (r *soakRun) measure(h *soakHost) (soakResources, error) {
	pid := h.p.Pid()
	res := soakResources{fds: map[string]int{}, goroutines: map[string]int{}}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return res, err
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if i := strings.Index(target, ":["); i >= 0 && !strings.HasPrefix(target, "anon_inode") {
			target = target[:i]
		}
		res.fds[target]++
	}
	_ = os.Remove(r.dump)
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return res, err
	}
	var dump []byte
	if !testutil.Eventually(10*time.Second, func() bool {
		dump, err = os.ReadFile(r.dump)
		return err == nil
	}) {
		return res, fmt.Errorf("no goroutine dump: %v", err)
	}
	// "N @ 0x… 0x…" then "#\t0x…\tfunction+0x…\tfile:line" lines, per stack.
	var count int
	var frames []string
	flush := func() {
		if count > 0 {
			res.goroutines[strings.Join(frames, " ← ")] += count
		}
		count, frames = 0, nil
	}
	for _, line := range strings.Split(string(dump), "\n") {
		switch {
		case strings.Contains(line, " @ 0x"):
			flush()
			count, _ = strconv.Atoi(strings.Fields(line)[0])
		case strings.HasPrefix(line, "#\t"):
			f := strings.Fields(line)
			if len(f) >= 3 {
				fn, _, _ := strings.Cut(f[2], "+0x")
				frames = append(frames, fn)
			}
		}
	}
	flush()
	// The dump's own goroutine is in both.
	return res, nil
}

// ---- faults ----

const proxyPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"

// chaos installs random faults until the lanes are done.
func (r *soakRun) chaos(rng *rand.Rand) {
	for {
		select {
		case <-r.stop:
			return
		case <-time.After(time.Duration(r.set.faultGap/4+rng.IntN(r.set.faultGap)) * time.Millisecond):
		}
		f := r.randomFault(rng)
		r.mu.Lock()
		var ids []string
		for id := range r.live {
			ids = append(ids, id)
		}
		r.mu.Unlock()
		sort.Strings(ids)
		if len(ids) > 0 && rng.IntN(10) < 7 {
			f.SandboxID = ids[rng.IntN(len(ids))]
		}
		if f.Times == 0 {
			f.Times = 1 + rng.IntN(2)
		}
		r.env.Server.AddFault(f)
		r.note("fault %+v", f)
		if rng.IntN(25) == 0 {
			r.env.Server.ClearFaults()
			r.note("faults cleared")
		}
	}
}

func (r *soakRun) randomFault(rng *rand.Rand) emulator.Fault {
	paths := []string{
		`^/api/sandbox/[^/]+$`, `^/api/sandbox$`, `/process/execute$`, `/process/session$`,
		`/process/session/[^/]+/exec$`, `/process/session/[^/]+/command/[^/]+$`, `/files`,
		`/process/pty`, `/(start|stop)$`, `/work-dir$|/user-home-dir$`,
	}
	path := paths[rng.IntN(len(paths))]
	for {
		switch k := rng.IntN(15); k {
		case 0:
			return emulator.Fault{Method: "GET", Path: `^/api/sandbox/[^/]+$`, Status: 503}
		case 1:
			return emulator.Fault{Path: path, Status: 502, Body: proxyPage}
		case 2:
			return emulator.Fault{Path: path, Status: []int{500, 502, 503, 504}[rng.IntN(4)]}
		case 3:
			return emulator.Fault{Path: `/logs$`, DropWebSocketAfterBytes: 1 + rng.IntN(3000)}
		case 4:
			return emulator.Fault{Path: `/process/pty/`, DropWebSocketAfterBytes: 1 + rng.IntN(3000)}
		case 5:
			return emulator.Fault{Path: path, Latency: time.Duration(20+rng.IntN(800)) * time.Millisecond}
		case 6:
			return emulator.Fault{Path: `/exec$`, ExitCodeDelay: time.Duration(50+rng.IntN(1500)) * time.Millisecond}
		case 7, 8:
			return emulator.Fault{Path: path, Reset: true, ResetAfterBytes: rng.IntN(3) * rng.IntN(120)}
		case 9:
			return emulator.Fault{Method: "GET", Path: path, SlowBody: time.Duration(1+rng.IntN(30)) * time.Millisecond, SlowBodyChunk: 1 + rng.IntN(300)}
		case 10:
			return emulator.Fault{Method: "POST", Path: `^/api/sandbox$`, Status: 429, RetryAfter: "1"}
		case 11:
			return emulator.Fault{Method: "DELETE", Path: `^/api/sandbox/[^/]+$`, Status: []int{500, 502}[rng.IntN(2)]}
		case 12:
			return emulator.Fault{Path: `/process/session/[^/]+/command/[^/]+/logs$`, Reset: true}
		case 13:
			if r.set.slowFaults {
				return emulator.Fault{Path: `/logs$`, HalfOpenAfterEnd: true, Times: 1}
			}
		case 14:
			if r.set.slowFaults {
				return emulator.Fault{Method: "GET", Path: `^/api/sandbox/[^/]+$`, Hang: true, Times: 1}
			}
		}
	}
}

// noise sends what a confused or hurried host might: health checks (which
// must always be answered), lines that are not JSON or not requests,
// unknown methods, bad params, notifications and stray responses.
func (r *soakRun) noise(rng *rand.Rand) {
	for {
		select {
		case <-r.stop:
			return
		case <-time.After(time.Duration(30+rng.IntN(250)) * time.Millisecond):
		}
		r.gate.RLock()
		h := r.cur
		var err error
		var c *soakCall
		switch k := rng.IntN(10); {
		case k < 3:
			c, err = h.call(protocol.MethodHealth, map[string]any{}, "", nil)
		case k < 5:
			lines := []string{`not json`, `{"jsonrpc":"2.0","id":"cut","method":"health"`, `{"a":}`, "\xff\xfe{}", `{"jsonrpc":"2.0","id":1,"method":"health","params":{"x":NaN}}`}
			err = h.sendRaw(lines[rng.IntN(len(lines))], 1)
		case k < 6:
			lines := []string{`{"foo":1}`, `{"jsonrpc":"2.0","method":7,"id":"m7"}`, `{"jsonrpc":"2.0","id":null,"method":"health"}`}
			err = h.sendRaw(lines[rng.IntN(len(lines))], 1)
		case k < 7:
			c, err = h.call([]string{"environmentTeleport", "loginPtyResize", "health "}[rng.IntN(3)], map[string]any{}, "", nil)
		case k < 8:
			c, err = h.call([]string{protocol.MethodEnvironmentExecute, protocol.MethodEnvironmentAcquireLease, protocol.MethodDuplexChannelWrite}[rng.IntN(3)],
				[]any{"params", "as", "an", "array"}, "", nil)
		case k < 9:
			err = h.sendRaw(`{"jsonrpc":"2.0","method":"health","params":{}}`, 0)
		default:
			err = h.sendRaw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"stray":true}}`, 900000+rng.IntN(1000)), 0)
		}
		r.gate.RUnlock()
		if err != nil {
			r.fail("noise: writing to worker %d: %v", h.epoch, err)
			continue
		}
		if c == nil {
			continue
		}
		rep, err := c.wait(60 * time.Second)
		switch {
		case errors.Is(err, errNoReply):
		case err != nil:
			r.fail("noise: worker %d stopped answering: %v", h.epoch, err)
		case c.method == protocol.MethodHealth && rep.Error != nil && !h.stopping.Load():
			r.fail("health answered %s", rep.Error)
		case c.method != protocol.MethodHealth && rep.Error == nil:
			r.fail("%q with bad params answered %s", c.method, rep.Result)
		}
	}
}

// ---- lanes ----

// soakLane is one host's worth of work: one lease at a time, driven by its
// own random source.
type soakLane struct {
	r        *soakRun
	n        int
	rng      *rand.Rand
	dir      string // host folder for sync
	lease    *soakLease
	cleanups []json.RawMessage // creation-cleanup envelopes of failed acquires
	setups   []string          // interactive setups not cancelled yet
	step     int
}

type soakLease struct {
	lease
	meta  json.RawMessage // the lease metadata the worker returned, which the host passes back
	reuse bool
	state string // "live", "stopped", "unknown" (a teardown's outcome is not known)
	home  string
}

func (l *soakLane) note(format string, args ...any) {
	l.r.note("lane %d step %d: %s", l.n, l.step, fmt.Sprintf(format, args...))
}

func (l *soakLane) run() {
	for l.step = 0; l.step < l.r.set.steps; l.step++ {
		l.act()
		l.r.progress.Add(1)
	}
}

func (l *soakLane) act() {
	k := l.rng.IntN(100)
	switch {
	case l.lease == nil:
		switch {
		case k < 80:
			l.acquire()
		case k < 87:
			l.probe()
		case k < 94:
			l.interactiveSetup()
		default:
			l.validate()
		}
	case l.lease.state != "live":
		switch {
		case k < 55 && l.lease.reuse:
			l.resume()
		case k < 85:
			l.teardown(protocol.MethodEnvironmentDestroyLease, false)
		default:
			l.executeOne(l.pickCommand(l.rng.IntN(4) == 0))
		}
	default:
		switch {
		case k < 28:
			l.executeOne(l.pickCommand(l.rng.IntN(4) == 0))
		case k < 38:
			l.executeMany()
		case k < 46:
			l.syncRoundTrip()
		case k < 53:
			l.login()
		case k < 61:
			l.duplex()
		case k < 67 && l.lease.reuse:
			l.resume()
		case k < 68:
			l.realize()
		case k < 69:
			l.ingress()
		case k < 75:
			l.concurrentMix()
		case k < 82:
			l.teardownWithWorkInFlight()
		default:
			l.teardown([]string{protocol.MethodEnvironmentReleaseLease, protocol.MethodEnvironmentStopLease, protocol.MethodEnvironmentDestroyLease}[l.rng.IntN(3)], l.rng.IntN(2) == 0)
		}
	}
}

func (l *soakLane) setLease(sl *soakLease) {
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	if l.lease != nil {
		delete(l.r.live, l.lease.id)
	}
	l.lease = sl
	if sl != nil {
		l.r.live[sl.id] = true
	}
}

func (l *soakLane) acquire() {
	reuse := l.rng.IntN(3) == 0
	extra := ""
	if reuse {
		extra = `,"reuseLease":true`
	}
	cfg := leaseConfig(l.r.env, extra)
	p := baseParams(cfg)
	p["runId"] = fmt.Sprintf("run-%d-%d", l.n, l.step)
	// A reusable lease's workspace sentinel needs an agent and a workspace.
	p["agentId"], p["executionWorkspaceId"], p["adapterType"] = fmt.Sprintf("agent-%d", l.n), fmt.Sprintf("ws-%d", l.n), "claude_local"
	o := l.r.do(protocol.MethodEnvironmentAcquireLease, p, "", "", 150*time.Second, nil)
	if o.err != nil {
		return
	}
	if o.rep.Error != nil {
		l.note("acquire failed: %s", o.rep.Error)
		var data struct {
			Schema  string          `json:"schema"`
			Cleanup json.RawMessage `json:"cleanup"`
		}
		if json.Unmarshal(o.rep.Error.Data, &data) == nil && data.Schema == protocol.CreationCleanupSchema {
			l.cleanups = append(l.cleanups, data.Cleanup)
		}
		if !o.excused(l.r) {
			l.r.fail("acquire failed with no fault: %s", o.rep.Error)
		}
		return
	}
	var res struct {
		ProviderLeaseID string          `json:"providerLeaseId"`
		Metadata        json.RawMessage `json:"metadata"`
	}
	var meta struct {
		RemoteCwd string `json:"remoteCwd"`
	}
	if err := json.Unmarshal(o.rep.Result, &res); err != nil || res.ProviderLeaseID == "" || json.Unmarshal(res.Metadata, &meta) != nil || meta.RemoteCwd == "" {
		l.r.fail("acquire answered %s", o.rep.Result)
		return
	}
	sl := &soakLease{lease: lease{id: res.ProviderLeaseID, remoteCwd: meta.RemoteCwd, cfg: cfg}, meta: res.Metadata, reuse: reuse, state: "live"}
	if v, ok := l.r.env.Server.Sandbox(sl.id); ok {
		sl.home = v.HomeDir
		if err := writeStandIns(sl.home); err != nil {
			l.r.fail("installing the stand-in CLIs: %v", err)
		}
	}
	l.setLease(sl)
	l.note("acquired %s (reuse %v)", sl.id, reuse)
}

// writeStandIns is installStandIns without a test to fail.
func writeStandIns(home string) error {
	write := func(rel, content string, mode os.FileMode) error {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(content), mode)
	}
	if err := write(".bash_profile", `export PATH="$HOME/bin:$PATH"`+"\n", 0o644); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "standins", "claude"))
	if err != nil {
		return err
	}
	return write("bin/claude", string(b), 0o755)
}

func (l *soakLane) probe() {
	o := l.r.do(protocol.MethodEnvironmentProbe, baseParams(leaseConfig(l.r.env, "")), "", "", 150*time.Second, nil)
	if o.err == nil && o.rep.Error != nil && !o.excused(l.r) {
		l.r.fail("probe failed with no fault: %s", o.rep.Error)
	}
	var res struct {
		OK bool `json:"ok"`
	}
	if o.err == nil && o.rep.Error == nil && (json.Unmarshal(o.rep.Result, &res) != nil || !res.OK) && !o.excused(l.r) {
		l.r.fail("probe answered %s with no fault", o.rep.Result)
	}
}

func (l *soakLane) validate() {
	o := l.r.do(protocol.MethodEnvironmentValidateConfig, map[string]any{"driverKey": "daytona", "config": leaseConfig(l.r.env, "")}, "", "", 30*time.Second, nil)
	if o.err == nil && o.rep.Error != nil {
		l.r.fail("validateConfig failed: %s", o.rep.Error)
	}
}

func (l *soakLane) leaseParams(extra map[string]any) map[string]any {
	p := baseParams(l.lease.cfg)
	p["providerLeaseId"] = l.lease.id
	p["leaseMetadata"] = l.lease.meta
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func (l *soakLane) resume() {
	o := l.r.do(protocol.MethodEnvironmentResumeLease, l.leaseParams(nil), "", l.lease.id, 150*time.Second, nil)
	if o.err != nil {
		l.lease.state = "unknown"
		return
	}
	if o.rep.Error != nil {
		if !o.excused(l.r) {
			l.r.fail("resume of %s failed with no fault: %s", l.lease.id, o.rep.Error)
		}
		l.lease.state = "unknown"
		return
	}
	var res struct {
		ProviderLeaseID *string         `json:"providerLeaseId"`
		Metadata        json.RawMessage `json:"metadata"`
	}
	var meta struct {
		Expired bool `json:"expired"`
	}
	if err := json.Unmarshal(o.rep.Result, &res); err != nil || json.Unmarshal(res.Metadata, &meta) != nil {
		l.r.fail("resume answered %s", o.rep.Result)
		return
	}
	if meta.Expired || res.ProviderLeaseID == nil {
		v, exists := l.r.env.Server.Sandbox(l.lease.id)
		if exists && v.State != "destroying" && !o.excused(l.r) {
			l.r.fail("resume of %s answered expired while its sandbox is %s: %s", l.lease.id, v.State, o.rep.Result)
		}
		if !exists {
			l.setLease(nil)
		} else {
			l.lease.state = "unknown"
		}
		return
	}
	l.lease.state = "live"
	l.lease.meta = res.Metadata
}

func (l *soakLane) realize() {
	p := baseParams(l.lease.cfg)
	p["lease"] = map[string]any{"providerLeaseId": l.lease.id, "metadata": map[string]any{"remoteCwd": l.lease.remoteCwd}, "expiresAt": nil}
	p["workspace"] = map[string]any{"localPath": "/srv/paperclip/soak"}
	o := l.r.do(protocol.MethodEnvironmentRealizeWorkspace, p, newInvocation(), l.lease.id, 150*time.Second, nil)
	if o.err == nil && o.rep.Error != nil && !o.excused(l.r) {
		l.r.fail("realize on %s failed with no fault: %s", l.lease.id, o.rep.Error)
	}
}

// interactiveSetup starts a setup sandbox, reads it, and cancels it (or,
// now and then, leaves it to the cleanup).
func (l *soakLane) interactiveSetup() {
	cfg := leaseConfig(l.r.env, "")
	p := baseParams(cfg)
	p["sessionId"] = fmt.Sprintf("sess-%d-%d", l.n, l.step)
	p["connectionExpiresInMinutes"] = 30
	o := l.r.do(protocol.MethodEnvironmentStartInteractiveSetup, p, "", "", 150*time.Second, nil)
	if o.err != nil {
		return
	}
	if o.rep.Error != nil {
		if !o.excused(l.r) {
			l.r.fail("startInteractiveSetup failed with no fault: %s", o.rep.Error)
		}
		return
	}
	var res struct {
		ProviderLeaseID string `json:"providerLeaseId"`
		Status          string `json:"status"`
	}
	if err := json.Unmarshal(o.rep.Result, &res); err != nil || res.ProviderLeaseID == "" {
		l.r.fail("startInteractiveSetup answered %.300s", o.rep.Result)
		return
	}
	l.setups = append(l.setups, res.ProviderLeaseID)
	q := baseParams(cfg)
	q["providerLeaseId"] = res.ProviderLeaseID
	q["includeConnectionPayload"] = l.rng.IntN(2) == 0
	g := l.r.do(protocol.MethodEnvironmentGetInteractiveSetup, q, "", res.ProviderLeaseID, 60*time.Second, nil)
	if g.err == nil && g.rep.Error != nil && !g.excused(l.r) {
		l.r.fail("getInteractiveSetup of %s failed with no fault: %s", res.ProviderLeaseID, g.rep.Error)
	}
	if l.rng.IntN(4) != 0 {
		l.cancelSetup(res.ProviderLeaseID, cfg)
	}
}

func (l *soakLane) cancelSetup(id string, cfg json.RawMessage) bool {
	q := baseParams(cfg)
	q["providerLeaseId"] = id
	c := l.r.do(protocol.MethodEnvironmentCancelInteractiveSetup, q, "", id, 60*time.Second, nil)
	if c.err != nil || c.rep.Error != nil {
		if c.err == nil && !c.excused(l.r) {
			l.r.fail("cancelInteractiveSetup of %s failed with no fault: %s", id, c.rep.Error)
		}
		return false
	}
	l.setups = slices.DeleteFunc(l.setups, func(s string) bool { return s == id })
	return true
}

// ingress asks for the runner ingress of the lease.
func (l *soakLane) ingress() {
	p := baseParams(l.lease.cfg)
	p["lease"] = map[string]any{"providerLeaseId": l.lease.id, "metadata": l.lease.meta, "expiresAt": nil}
	p["port"], p["path"] = 43127, "/api/runner/v1/connect/soak"
	o := l.r.do(protocol.MethodEnvironmentRunnerIngressEndpoint, p, "", l.lease.id, 60*time.Second, nil)
	if o.err == nil && o.rep.Error != nil && !o.excused(l.r) {
		l.r.fail("runnerIngressEndpoint on %s failed with no fault: %s", l.lease.id, o.rep.Error)
	}
}

// ---- executes ----

type soakCmd struct {
	spec           cmdSpec
	exit           int // when !timeout
	timeout        bool
	stdout, stderr string // what the host must get when nothing interfered
	exact          bool   // stdout and stderr are known exactly
	text           bool   // the output is valid UTF-8 (a fault cannot change how it decodes)
}

// generatedText is generatedString without the session log's stream
// markers (a command printing \x01\x01\x01 confuses Daytona's own demuxer).
func generatedText(rng *rand.Rand) string {
	return strings.NewReplacer("\x01", "", "\x02", "").Replace(generatedString(rng))
}

func (l *soakLane) pickCommand(bypass bool) soakCmd {
	rng := l.rng
	maxSeq := 20000
	if l.r.set.long() {
		maxSeq = 200000
	}
	var c soakCmd
	switch k := rng.IntN(100); {
	case k < 20:
		v, w := generatedText(rng), generatedText(rng)
		c = soakCmd{spec: cmdSpec{command: "sh", args: []string{"-c", `printf '%s' "$SOAK_V"; printf '%s' "$SOAK_W" >&2`},
			env: map[string]string{"SOAK_V": v, "SOAK_W": w}}, stdout: v, stderr: w, exact: true, text: true}
		if bypass {
			// One-shot output is one stream, in the order it was written.
			c.stdout, c.stderr = v+w, ""
		}
	case k < 35:
		payload := make([]byte, rng.IntN(48<<10))
		for i := range payload {
			payload[i] = byte(rng.Uint32())
			// Three \x01 or \x02 in a row are the session log's stream
			// markers, which Daytona's own demuxer cannot tell from output.
			if i >= 2 && payload[i] <= 2 && payload[i] == payload[i-1] && payload[i] == payload[i-2] {
				payload[i] = 'x'
			}
		}
		c = soakCmd{spec: cmdSpec{command: "base64", args: []string{"-d"}, stdin: strp(base64.StdEncoding.EncodeToString(payload))},
			stdout: string(utf8text.Replace(payload)), exact: true, text: utf8.Valid(payload)}
		if bypass {
			// The one-shot answer is Daytona's JSON: one U+FFFD per ill-formed byte.
			c.stdout = string([]rune(string(payload)))
		}
	case k < 50:
		n := 1 + rng.IntN(maxSeq)
		var want strings.Builder
		for i := 1; i <= n; i++ {
			want.WriteString(strconv.Itoa(i))
			want.WriteByte('\n')
		}
		c = soakCmd{spec: cmdSpec{command: "seq", args: []string{"1", strconv.Itoa(n)}}, stdout: want.String(), exact: true, text: true}
	case k < 65:
		n, code := rng.IntN(200), rng.IntN(4)
		var out, errs strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&out, "o%d\n", i)
			fmt.Fprintf(&errs, "e%d\n", i)
		}
		c = soakCmd{spec: cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo o$i; echo e$i >&2; i=$((i+1)); done; exit %d`, n, code)}},
			exit: code, stdout: out.String(), stderr: errs.String(), exact: true, text: true}
		if bypass {
			// One-shot output is one stream.
			c = soakCmd{spec: cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf(`seq 1 %d; exit %d`, n, code)}}, exit: code, exact: true, text: true}
			for i := 1; i <= n; i++ {
				c.stdout += strconv.Itoa(i) + "\n"
			}
		}
	case k < 73:
		ms := 1000 + rng.IntN(600)
		secs := (ms + 500) / 1000 // the notice rounds, as the plugin's Math.round
		c = soakCmd{spec: cmdSpec{command: "sh", args: []string{"-c", `echo before; sleep 4; echo after`}, timeoutMs: float64(ms)},
			timeout: true, stdout: "before\n", stderr: fmt.Sprintf("Command timed out after %d s.\n", secs), exact: true, text: true}
		if bypass {
			c.stdout, c.stderr = "", "request timeout: command execution timeout\n"
		}
	case k < 85:
		vals := make([]string, 1+rng.IntN(12))
		var want strings.Builder
		for i := range vals {
			vals[i] = generatedText(rng)
			want.WriteString("[" + vals[i] + "]\n")
		}
		c = soakCmd{spec: cmdSpec{command: "printf", args: append([]string{"[%s]\n"}, vals...)}, stdout: want.String(), exact: true, text: true}
	case k < 89:
		c = soakCmd{spec: cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf("sleep 0.%d; echo late", 1+rng.IntN(5))}}, stdout: "late\n", exact: true, text: true}
	case k < 93:
		// One long line (longer than the daemon's read buffer) on each
		// stream, carriage returns inside, no final newline.
		n, m := 1+rng.IntN(200000), 1+rng.IntN(90000)
		c = soakCmd{spec: cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf(`head -c %d /dev/zero | tr '\0' 'x'; printf '\r\r'; head -c %d /dev/zero | tr '\0' 'y' >&2`, n, m)}},
			stdout: strings.Repeat("x", n) + "\r\r", stderr: strings.Repeat("y", m), exact: true, text: true}
		if bypass {
			c.stdout, c.stderr = c.stdout+c.stderr, ""
		}
	case k < 96:
		// A large stdin, counted back.
		in := strings.Repeat(generatedText(rng)+"\n", 1+rng.IntN(4000))
		c = soakCmd{spec: cmdSpec{command: "wc", args: []string{"-c"}, stdin: strp(in)}, stdout: strconv.Itoa(len(in)) + "\n", exact: true, text: true}
	default:
		c = soakCmd{spec: cmdSpec{command: "sh", args: []string{"-c", `pwd; exit 9`}, cwd: strp(l.lease.remoteCwd)}, exit: 9, stdout: l.lease.remoteCwd + "\n", exact: true, text: true}
	}
	c.spec.bypass = bypass
	if !bypass {
		// The daemon's log ends a last line without newline with one.
		c.stdout, c.stderr = endLine(c.stdout), endLine(c.stderr)
	}
	return c
}

func endLine(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return s
}

// executeOne runs one command and checks its result.
func (l *soakLane) executeOne(c soakCmd) {
	inv := newInvocation()
	o := l.r.do(protocol.MethodEnvironmentExecute, executeParams(l.lease.lease, c.spec), inv, l.lease.id, l.executeBound(c), nil)
	l.checkExecute(c, inv, o, l.lease.state != "live")
}

func (l *soakLane) executeBound(c soakCmd) time.Duration {
	return 120*time.Second + time.Duration(c.spec.timeoutMs)*time.Millisecond
}

// executeMany runs two to four commands at once on the lease.
func (l *soakLane) executeMany() {
	n := 2 + l.rng.IntN(3)
	cmds := make([]soakCmd, n)
	for i := range cmds {
		cmds[i] = l.pickCommand(l.rng.IntN(4) == 0)
	}
	var wg sync.WaitGroup
	for _, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inv := newInvocation()
			o := l.r.do(protocol.MethodEnvironmentExecute, executeParams(l.lease.lease, c.spec), inv, l.lease.id, l.executeBound(c), nil)
			// Commands of one session run one after another in its shell:
			// a timeout counts from the dispatch, so a command queued
			// behind a long one may run out of it before it prints.
			l.checkExecute(c, inv, o, c.timeout)
		}()
	}
	wg.Wait()
}

type soakExecResult struct {
	ExitCode *int   `json:"exitCode"`
	TimedOut *bool  `json:"timedOut"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// checkExecute checks one execute's outcome; interfered says something the
// lane did (a teardown) may have cut it short.
func (l *soakLane) checkExecute(c soakCmd, inv string, o outcome, interfered bool) {
	if o.err != nil {
		return
	}
	desc := fmt.Sprintf("execute %s %q (bypass %v) on %s", c.spec.command, truncate(strings.Join(c.spec.args, " "), 80), c.spec.bypass, o.sbID)
	excused := interfered || o.excused(l.r)
	if o.rep.Error != nil {
		if !excused {
			l.r.fail("%s failed with no fault: %s", desc, o.rep.Error)
		} else {
			l.r.faultFailures.Add(1)
		}
		return
	}
	var res soakExecResult
	if err := json.Unmarshal(o.rep.Result, &res); err != nil || res.TimedOut == nil {
		l.r.fail("%s answered a malformed result: %.300s", desc, o.rep.Result)
		return
	}
	out, errs, _ := o.h.streamed(inv)
	if excused && *res.TimedOut && res.ExitCode == nil && res.Stdout == "" && c.stderr != res.Stderr &&
		strings.Count(res.Stderr, "\n") == 1 && strings.HasSuffix(res.Stderr, "\n") {
		// A Daytona 408 or 504 (or a request past its deadline) under a
		// fault is the SDK's timeout, answered as the plugin answers it:
		// no output, the SDK's message as stderr, whatever was streamed.
		l.r.faultFailures.Add(1)
		return
	}
	if c.spec.bypass {
		if out != "" || errs != "" {
			l.r.fail("%s: a one-shot command streamed output", desc)
		}
	} else {
		if out != res.Stdout {
			l.r.fail("%s: streamed stdout (%d bytes) is not the result's (%d bytes)%s", desc, len(out), len(res.Stdout), firstDiff(out, res.Stdout))
		}
		notice, cut := strings.CutPrefix(res.Stderr, errs)
		if errs != res.Stderr && !(*res.TimedOut && cut && strings.HasPrefix(notice, "Command timed out after ")) {
			l.r.fail("%s: streamed stderr %q is not the result's %q", desc, truncate(errs, 200), truncate(res.Stderr, 200))
		}
	}
	completed := !*res.TimedOut && res.ExitCode != nil && *res.ExitCode == c.exit && !c.timeout
	switch {
	case !excused && c.exact:
		l.r.exactChecks.Add(1)
		if c.timeout != *res.TimedOut || (!c.timeout && (res.ExitCode == nil || *res.ExitCode != c.exit)) || (c.timeout && res.ExitCode != nil) {
			l.r.fail("%s: exit %v timedOut %v, want exit %d timedOut %v (stderr %q)", desc, fmtExit(res.ExitCode), *res.TimedOut, c.exit, c.timeout, truncate(res.Stderr, 300))
			return
		}
		if res.Stdout != c.stdout {
			l.r.fail("%s: stdout (%d bytes) is not what the command printed (%d bytes)%s", desc, len(res.Stdout), len(c.stdout), firstDiff(res.Stdout, c.stdout))
		}
		if res.Stderr != c.stderr {
			l.r.fail("%s: stderr %q, want %q", desc, truncate(res.Stderr, 300), truncate(c.stderr, 300))
		}
	case completed && c.exact && c.text && !interfered:
		// Faults may fail a command, never cut the output of one that
		// reports its exit.
		l.r.faultChecks.Add(1)
		if res.Stdout != c.stdout {
			l.r.fail("%s under a fault: exit %d with stdout (%d bytes) that is not what the command printed (%d bytes)%s", desc, c.exit, len(res.Stdout), len(c.stdout), firstDiff(res.Stdout, c.stdout))
		}
		if res.Stderr != c.stderr {
			l.r.fail("%s under a fault: exit %d with stderr %q, want %q", desc, c.exit, truncate(res.Stderr, 300), truncate(c.stderr, 300))
		}
	}
}

func fmtExit(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return ""
	}
	lo := max(i-40, 0)
	return fmt.Sprintf("; first difference at byte %d: got %q, want %q", i, truncate(got[lo:], 80+i-lo), truncate(want[lo:], 80+i-lo))
}

// ---- teardowns ----

// teardown releases, stops or destroys the lease and checks the sandbox
// runs nothing once the worker says so.
func (l *soakLane) teardown(method string, cancel bool) bool {
	extra := map[string]any{}
	if cancel {
		extra["cancelActiveWork"] = true
	}
	id := l.lease.id
	o := l.r.do(method, l.leaseParams(extra), "", id, 150*time.Second, nil)
	if o.err != nil {
		l.lease.state = "unknown"
		return false
	}
	if o.rep.Error != nil {
		l.note("%s of %s failed: %s", method, id, o.rep.Error)
		if !o.excused(l.r) {
			l.r.fail("%s of %s failed with no fault: %s", method, id, o.rep.Error)
		}
		l.lease.state = "unknown"
		return false
	}
	var res struct {
		ProviderLeaseID string `json:"providerLeaseId"`
		State           string `json:"state"`
	}
	if err := json.Unmarshal(o.rep.Result, &res); err != nil || res.ProviderLeaseID != id {
		l.r.fail("%s of %s answered %s", method, id, o.rep.Result)
		return false
	}
	want := "destroyed"
	if method == protocol.MethodEnvironmentStopLease || (method == protocol.MethodEnvironmentReleaseLease && (l.lease.reuse || cancel)) {
		want = "stopped"
	}
	if res.State != want && !(want == "stopped" && res.State == "destroyed" && o.excused(l.r)) {
		l.r.fail("%s of %s (reuse %v) answered state %s, want %s", method, id, l.lease.reuse, res.State, want)
	}
	l.checkAtRest(id, res.State, method)
	l.note("%s of %s: %s", method, id, res.State)
	if res.State == "destroyed" {
		l.setLease(nil)
	} else {
		l.lease.state = "stopped"
	}
	return true
}

// checkAtRest: a sandbox the worker reported stopped or destroyed runs no
// process (and a destroyed one is gone).
func (l *soakLane) checkAtRest(id, state, method string) {
	var last emulator.SandboxView
	var exists bool
	ok := testutil.Eventually(10*time.Second, func() bool {
		last, exists = l.r.env.Server.Sandbox(id)
		switch {
		case !exists:
			return true
		case state == "destroyed":
			return last.State == "destroying" && last.Processes == 0
		default:
			return (last.State == "stopped" || last.State == "archived") && last.Processes == 0
		}
	})
	if !ok {
		l.r.fail("after %s of %s answered %s the sandbox is %s with %d processes, %d sessions, %d PTYs",
			method, id, state, last.State, last.Processes, last.Sessions, last.PTYs)
	}
}

// teardownWithWorkInFlight starts commands (and sometimes a duplex
// channel), then tears the lease down while they run: every call must
// still be answered, and the sandbox must run nothing afterwards.
func (l *soakLane) teardownWithWorkInFlight() {
	method := []string{protocol.MethodEnvironmentReleaseLease, protocol.MethodEnvironmentStopLease, protocol.MethodEnvironmentDestroyLease}[l.rng.IntN(3)]
	cancel := l.rng.IntN(3) != 0
	sleep := "20"
	if !cancel {
		sleep = "2" // a graceful teardown waits for the command (up to the liveness timeout)
	}
	n := 1 + l.rng.IntN(2)
	var wg sync.WaitGroup
	started := make(chan string, n) // the session ones, which stream
	for i := 0; i < n; i++ {
		bypass := l.rng.IntN(3) == 0
		spec := cmdSpec{command: "sh", args: []string{"-c", "echo started; sleep " + sleep + "; echo finished"}, bypass: bypass}
		inv := newInvocation()
		h, c, err := l.r.send(protocol.MethodEnvironmentExecute, executeParams(l.lease.lease, spec), inv, nil)
		if err != nil {
			continue
		}
		if !bypass {
			started <- inv
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.wait(150 * time.Second); err != nil && !errors.Is(err, errNoReply) {
				l.r.fail("worker %d: an execute in flight during %s: %v", h.epoch, method, err)
			}
		}()
	}
	close(started)
	if l.rng.IntN(2) == 0 {
		// Let the commands start first.
		h := l.r.host()
		for inv := range started {
			testutil.Eventually(20*time.Second, func() bool { out, _, _ := h.streamed(inv); return out != "" })
		}
	}
	var routeHost *soakHost
	var route *soakRoute
	if l.rng.IntN(3) == 0 {
		routeHost, route, _ = l.openDuplex([]string{"cat"})
	}
	l.teardown(method, cancel)
	wg.Wait()
	if route != nil {
		l.closeRoute(routeHost, route)
	}
}

// concurrentMix runs what one lease may carry at once: commands, a sync, a
// duplex channel and a login.
func (l *soakLane) concurrentMix() {
	var wg sync.WaitGroup
	cmds := []soakCmd{l.pickCommand(false), l.pickCommand(true)}
	// Each part draws from its own source: the lane's must stay in step.
	seeds := []uint64{l.rng.Uint64(), l.rng.Uint64(), l.rng.Uint64()}
	run := func(seed uint64, f func(*soakLane)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := *l
			sub.rng = rand.New(rand.NewPCG(seed, uint64(l.n)))
			f(&sub)
		}()
	}
	for _, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inv := newInvocation()
			o := l.r.do(protocol.MethodEnvironmentExecute, executeParams(l.lease.lease, c.spec), inv, l.lease.id, l.executeBound(c), nil)
			l.checkExecute(c, inv, o, c.timeout)
		}()
	}
	run(seeds[0], (*soakLane).syncRoundTrip)
	run(seeds[1], (*soakLane).duplex)
	run(seeds[2], (*soakLane).login)
	wg.Wait()
}

// cleanUp destroys what the lane still holds, as a host would before
// retiring: its lease and the sandboxes of failed acquires.
func (l *soakLane) cleanUp() {
	l.step = -1
	if l.lease != nil {
		for attempt := 0; attempt < 3 && l.lease != nil; attempt++ {
			l.teardown(protocol.MethodEnvironmentDestroyLease, true)
		}
	}
	for _, id := range slices.Clone(l.setups) {
		for attempt := 0; attempt < 3; attempt++ {
			if l.cancelSetup(id, leaseConfig(l.r.env, "")) {
				break
			}
		}
	}
	for _, cleanup := range l.cleanups {
		p := baseParams(leaseConfig(l.r.env, ""))
		var pending struct {
			ProviderLeaseID string `json:"providerLeaseId"`
		}
		_ = json.Unmarshal(cleanup, &pending)
		p["providerLeaseId"] = pending.ProviderLeaseID
		p["leaseMetadata"] = map[string]any{"failedCreateCleanup": cleanup}
		o := l.r.do(protocol.MethodEnvironmentDestroyLease, p, "", "", 60*time.Second, nil)
		if o.err == nil && o.rep.Error != nil {
			l.r.fail("the cleanup of a failed acquire failed: %s", o.rep.Error)
		}
	}
}

// ---- sync ----

func (l *soakLane) syncRoundTrip() {
	name := fmt.Sprintf("soak-%d-%d-%s", l.n, l.step, uuid.NewString()[:8])
	src := filepath.Join(l.dir, name, "in")
	files := map[string][]byte{}
	for i := 0; i < 1+l.rng.IntN(6); i++ {
		rel := fmt.Sprintf("d%d/f%d.bin", l.rng.IntN(3), i)
		b := make([]byte, l.rng.IntN(20000))
		for j := range b {
			b[j] = byte(l.rng.Uint32())
		}
		files[rel] = b
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			l.r.fail("sync: %v", err)
			return
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			l.r.fail("sync: %v", err)
			return
		}
	}
	remote := l.lease.remoteCwd + "/" + name
	params := func(ops ...map[string]any) map[string]any {
		p := baseParams(l.lease.cfg)
		p["lease"] = map[string]any{"providerLeaseId": l.lease.id, "metadata": map[string]any{"provider": "daytona", "remoteCwd": l.lease.remoteCwd}, "expiresAt": nil}
		p["operations"] = ops
		return p
	}
	o := l.r.do(protocol.MethodEnvironmentSyncIn, params(op("in", []map[string]any{mapping(src, remote, "directory")})), newInvocation(), l.lease.id, 150*time.Second, nil)
	if o.err != nil {
		return
	}
	if o.rep.Error != nil {
		if !o.excused(l.r) {
			l.r.fail("sync in on %s failed with no fault: %s", l.lease.id, o.rep.Error)
		}
		return
	}
	for rel, b := range files {
		got, err := os.ReadFile(filepath.Join(remote, rel))
		if err != nil || !bytes.Equal(got, b) {
			l.r.fail("sync in answered success, but %s in the sandbox is not what was sent (%d bytes, %v)", rel, len(got), err)
		}
	}
	dst := filepath.Join(l.dir, name, "out")
	o = l.r.do(protocol.MethodEnvironmentSyncOut, params(op("out", []map[string]any{mapping(remote, dst, "directory")})), newInvocation(), l.lease.id, 150*time.Second, nil)
	if o.err != nil {
		return
	}
	if o.rep.Error != nil {
		if !o.excused(l.r) {
			l.r.fail("sync out on %s failed with no fault: %s", l.lease.id, o.rep.Error)
		}
		return
	}
	for rel, b := range files {
		got, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(got, b) {
			l.r.fail("sync out answered success, but %s on the host is not the sandbox's (%d bytes, %v)", rel, len(got), err)
		}
	}
}

// ---- terminals ----

func (l *soakLane) openDuplex(argv []string) (*soakHost, *soakRoute, bool) {
	h := l.r.host()
	rt := h.newRoute("duplex", "duplex-soak-"+uuid.NewString())
	p := duplexParams(l.lease.lease, rt.id, argv)
	o := l.r.doPinned(h, protocol.MethodDuplexChannelOpen, p, newInvocation(), l.lease.id, 60*time.Second, func(rep soakReply) { h.bind(rt, rep) })
	if o.err != nil {
		return h, nil, false
	}
	if o.rep.Error != nil {
		if !o.excused(l.r) {
			l.r.fail("duplexChannelOpen on %s failed with no fault: %s", l.lease.id, o.rep.Error)
		}
		l.closeRoute(h, rt)
		return h, nil, false
	}
	return h, rt, true
}

func (l *soakLane) closeRoute(h *soakHost, rt *soakRoute) {
	method := protocol.MethodDuplexChannelClose
	if rt.kind == "login" {
		method = protocol.MethodLoginPtyClose
	}
	l.r.doPinned(h, method, map[string]any{"hostRouteId": rt.id}, "", "", 30*time.Second, func(rep soakReply) { h.ackClose(rt, rep) })
}

// duplex echoes random bytes through cat and checks they come back whole.
func (l *soakLane) duplex() {
	opened := time.Now()
	h, rt, ok := l.openDuplex([]string{"cat"})
	if !ok {
		return
	}
	var sent []byte
	for i := 0; i < 1+l.rng.IntN(3); i++ {
		b := make([]byte, 1+l.rng.IntN(40000))
		for j := range b {
			b[j] = byte(l.rng.Uint32())
		}
		sent = append(sent, b...)
		o := l.r.doPinned(h, protocol.MethodDuplexChannelWrite, map[string]any{"hostRouteId": rt.id, "workerSessionId": rt.sid, "data": base64.StdEncoding.EncodeToString(b)}, "", l.lease.id, 30*time.Second, nil)
		if o.err != nil {
			return
		}
		if o.rep.Error != nil {
			if !o.h.stopping.Load() && !l.r.faulted(l.lease.id, opened, o.rep.At) && !h.exited(rt) {
				l.r.fail("duplexChannelWrite on %s failed with no fault: %s", rt.id, o.rep.Error)
			}
			break
		}
	}
	got := h.await(rt, 60*time.Second, func() bool { return rt.data.Len() >= len(sent) || rt.exited })
	data := h.routeData(rt)
	if !bytes.Equal(data, sent) && !l.r.faulted(l.lease.id, opened, time.Now()) && h == l.r.host() {
		l.r.fail("duplex %s echoed %d of %d bytes (complete %v, exited %v)%s", rt.id, len(data), len(sent), got, h.exited(rt), firstDiff(string(data), string(sent)))
	}
	if l.rng.IntN(2) == 0 {
		o := l.r.doPinned(h, protocol.MethodDuplexChannelStop, map[string]any{"hostRouteId": rt.id, "workerSessionId": rt.sid}, "", l.lease.id, 30*time.Second, nil)
		if o.err == nil && o.rep.Error != nil && !o.h.stopping.Load() && !l.r.faulted(l.lease.id, opened, o.rep.At) {
			l.r.fail("duplexChannelStop of %s failed with no fault: %s", rt.id, o.rep.Error)
		}
		if o.err == nil && o.rep.Error == nil && !h.await(rt, 30*time.Second, func() bool { return rt.exited }) && !h.stopping.Load() {
			l.r.fail("duplex %s: stopped, but no exit came", rt.id)
		}
	}
	l.closeRoute(h, rt)
}

// login drives the stand-in claude: a URL, a prompt, a code, an exit.
func (l *soakLane) login() {
	h := l.r.host()
	rt := h.newRoute("login", uuid.NewString())
	home := newSessionHome(l.r.t)
	o := l.r.doPinned(h, protocol.MethodLoginPtyOpen, loginParams(l.lease.lease, rt.id, "claude", home), newInvocation(), l.lease.id, 60*time.Second, func(rep soakReply) { h.bind(rt, rep) })
	if o.err != nil {
		return
	}
	if o.rep.Error != nil {
		if !o.excused(l.r) {
			l.r.fail("loginPtyOpen on %s failed with no fault: %s", l.lease.id, o.rep.Error)
		}
		l.closeRoute(h, rt)
		return
	}
	quiet := func() bool {
		return !l.r.faulted(l.lease.id, o.c.sent, time.Now()) && !h.stopping.Load()
	}
	switch l.rng.IntN(3) {
	case 0: // the whole flow
		if !h.await(rt, 30*time.Second, func() bool { return bytes.Contains(rt.data.Bytes(), []byte("Paste code here")) || rt.exited }) {
			if quiet() {
				l.r.fail("login %s: no prompt within 30 s: %q", rt.id, h.routeData(rt))
			}
			break
		}
		code := fmt.Sprintf("CODE-%d-%d", l.n, l.step)
		l.r.doPinned(h, protocol.MethodLoginPtyInput, map[string]any{"workerSessionId": rt.sid, "data": code + "\r"}, "", l.lease.id, 30*time.Second, nil)
		exited := h.await(rt, 30*time.Second, func() bool { return rt.exited })
		if quiet() {
			h.mu.Lock()
			text, exitCode := rt.data.String(), rt.exitCode
			h.mu.Unlock()
			if !exited || exitCode == nil || *exitCode != 7 || !strings.Contains(text, "€ received ["+code+"]") {
				l.r.fail("login %s: exited %v with %s, output %q", rt.id, exited, fmtExit(exitCode), truncate(text, 500))
			}
		}
	case 1: // stopped at the prompt
		h.await(rt, 30*time.Second, func() bool { return bytes.Contains(rt.data.Bytes(), []byte("Paste code here")) || rt.exited })
		o := l.r.doPinned(h, protocol.MethodLoginPtyStop, map[string]any{"workerSessionId": rt.sid}, "", l.lease.id, 30*time.Second, nil)
		if o.err == nil && o.rep.Error == nil && !h.await(rt, 30*time.Second, func() bool { return rt.exited }) && quiet() {
			l.r.fail("login %s: stopped, but no exit came", rt.id)
		}
	default: // closed while it runs
	}
	l.closeRoute(h, rt)
}
