package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
	"github.com/paperclipai/daytona-worker/internal/procstat"
)

// benchEmulator starts an emulator for a benchmark.
func benchEmulator(b *testing.B, opts emulator.Options) *emulatorEnv {
	b.Helper()
	opts.Root = b.TempDir()
	env := &emulatorEnv{Env: emulatortest.Start(b, opts), root: opts.Root}
	removeDuplexDiagnostics(b, env.Env)
	return env
}

// directToolbox is a Daytona client of our own, talking to the emulator the
// way the worker does, without the worker.
func directToolbox(b *testing.B, env *emulatorEnv, sandboxID string) *daytona.Toolbox {
	b.Helper()
	c, err := daytona.New(daytona.Config{APIKey: env.APIKey, APIURL: env.APIURL})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := c.Get(context.Background(), sandboxID)
	if err != nil {
		b.Fatal(err)
	}
	return c.Toolbox(sb)
}

// loginScriptTrue is the worker's login-shell script for the command `true`
// without env, cwd or stdin (see worker/shell.go), so that the direct calls
// run exactly what the worker runs.
const loginScriptTrue = `if [ -f /etc/profile ]; then . /etc/profile >/dev/null 2>&1 || true; fi && ` +
	`if [ -f "$HOME/.profile" ]; then . "$HOME/.profile" >/dev/null 2>&1 || true; fi && ` +
	`if [ -f "$HOME/.bash_profile" ]; then . "$HOME/.bash_profile" >/dev/null 2>&1 || true; elif [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc" >/dev/null 2>&1 || true; fi && ` +
	`if [ -f "$HOME/.zprofile" ]; then . "$HOME/.zprofile" >/dev/null 2>&1 || true; fi && ` +
	`env GIT_TERMINAL_PROMPT='0' GCM_INTERACTIVE='Never' GIT_ASKPASS='echo' SSH_ASKPASS='echo' SSH_ASKPASS_REQUIRE='force' 'true'`

// directSessionRun does what the worker does for one session command:
// dispatch async while preparing the log stream's connection, follow the log
// WebSocket to its close, read the exit code.
func directSessionRun(ctx context.Context, tb *daytona.Toolbox, sessionID, command string, stdout, stderr io.Writer) (*int, error) {
	prepared := tb.PrepareLogStream(ctx)
	defer prepared.Close()
	cmd, err := tb.SessionExec(ctx, sessionID, daytona.SessionExecRequest{Command: command, Async: true})
	if err != nil {
		return nil, err
	}
	if _, err := tb.FollowSessionCommandLogs(ctx, sessionID, cmd.CmdID, daytona.FollowOptions{Stdout: stdout, Stderr: stderr, Prepared: prepared}); err != nil {
		return nil, err
	}
	got, err := tb.GetSessionCommand(ctx, sessionID, cmd.CmdID)
	if err != nil {
		return nil, err
	}
	return got.ExitCode, nil
}

// workerProfileArgs are the flags that make a benchmark's worker number i
// write its CPU profile to $DAYTONA_BENCH_WORKER_CPUPROFILE.i, if that is set.
func workerProfileArgs(i int) []string {
	path := os.Getenv("DAYTONA_BENCH_WORKER_CPUPROFILE")
	if path == "" {
		return nil
	}
	return []string{"--cpuprofile", path + "." + strconv.Itoa(i)}
}

// benchWorkerEnv is what DAYTONA_BENCH_WORKER_ENV adds to the environment of
// every benchmark's worker: space-separated NAME=value pairs, such as
// GOMAXPROCS=2 or GOGC=400, to compare runtime settings.
func benchWorkerEnv() []string { return strings.Fields(os.Getenv("DAYTONA_BENCH_WORKER_ENV")) }

// procCPU is the user+system CPU time pid has used, in clock ticks (100 per
// second on Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	f, err := procstat.Stat(pid)
	if err != nil {
		b.Skip("no /proc on this system")
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkExecuteOverhead measures what the worker adds to one in-session
// command (`true`): the environmentExecute round trip through the worker,
// minus the same dispatch + log follow + exit-code read made directly with
// our Daytona client, alternated so both see the same machine. Run it with
// a fixed count for stable percentiles, e.g. -benchtime 300x.
// DAYTONA_BENCH_WORKER_ENV sets the worker's environment (benchWorkerEnv).
func BenchmarkExecuteOverhead(b *testing.B) {
	env := benchEmulator(b, emulator.Options{})
	h := startHost(b, hostOptions{args: workerProfileArgs(0), env: benchWorkerEnv()})
	l := h.acquire(leaseConfig(env, ""))
	defer h.shutdown()
	defer h.destroy(l)
	// Warm both paths: the worker's session, connection pool and handle.
	h.execute(l, cmdSpec{command: "true"})
	ctx := context.Background()
	tb := directToolbox(b, env, l.id)
	if err := tb.CreateSession(ctx, "bench-direct"); err != nil {
		b.Fatal(err)
	}
	command := "( " + loginScriptTrue + " )"
	if _, err := directSessionRun(ctx, tb, "bench-direct", command, io.Discard, io.Discard); err != nil {
		b.Fatal(err)
	}

	var viaWorker, direct, overhead []time.Duration
	cpu0 := procCPU(b, h.w.Pid())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r := h.execute(l, cmdSpec{command: "true"})
		w := time.Since(start)
		if r.Err != nil || r.exit() != "0" {
			b.Fatalf("worker execute: %v exit %s", r.Err, r.exit())
		}
		start = time.Now()
		code, err := directSessionRun(ctx, tb, "bench-direct", command, io.Discard, io.Discard)
		d := time.Since(start)
		if err != nil || code == nil || *code != 0 {
			b.Fatalf("direct run: %v", err)
		}
		viaWorker, direct, overhead = append(viaWorker, w), append(direct, d), append(overhead, w-d)
	}
	b.StopTimer()
	workerCPU := procCPU(b, h.w.Pid()) - cpu0
	for _, s := range [][]time.Duration{viaWorker, direct, overhead} {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	b.ReportMetric(ms(percentile(overhead, 0.5)), "ms-overhead-p50")
	b.ReportMetric(ms(percentile(overhead, 0.99)), "ms-overhead-p99")
	b.ReportMetric(ms(percentile(viaWorker, 0.5)), "ms-worker-p50")
	b.ReportMetric(ms(percentile(viaWorker, 0.99)), "ms-worker-p99")
	b.ReportMetric(ms(percentile(direct, 0.5)), "ms-direct-p50")
	b.ReportMetric(ms(percentile(direct, 0.99)), "ms-direct-p99")
	// The quantiles' difference, as opposed to the quantiles of the paired
	// differences above (which add up the noise of both sides).
	b.ReportMetric(ms(percentile(viaWorker, 0.99)-percentile(direct, 0.99)), "ms-p99-diff")
	b.ReportMetric(float64(workerCPU.Microseconds())/float64(b.N), "µs-worker-cpu/op")
	b.ReportMetric(0, "ns/op")
}

// relayBenchLines is the output size of BenchmarkExecuteRelay in 1000-byte
// lines: DAYTONA_BENCH_RELAY_MB megabytes, 100 by default.
func relayBenchLines(b *testing.B) int {
	mb := 100
	if v := os.Getenv("DAYTONA_BENCH_RELAY_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("DAYTONA_BENCH_RELAY_MB=%q is not a positive integer", v)
		}
		mb = n
	}
	return mb * 1000
}

// relayBenchOutput is the command of BenchmarkExecuteRelay with the digest
// and size of its stdout: DAYTONA_BENCH_RELAY_MB megabytes of 1000-byte text
// lines, with DAYTONA_BENCH_RELAY_OUTPUT=line of one line, or with
// DAYTONA_BENCH_RELAY_OUTPUT=control of lines of \x03 bytes
// (output at its most expensive to escape: six bytes of JSON per byte; not
// \x01 or \x02, which the log format takes for stream markers when three
// come in a row).
func relayBenchOutput(b *testing.B) (script string, sum uint64, size int64) {
	n := relayBenchLines(b)
	switch kind := os.Getenv("DAYTONA_BENCH_RELAY_OUTPUT"); kind {
	case "", "text":
		sum, size = bigOutputSum(n)
		return bigOutputScript(n), sum, size
	case "control":
		line := append(bytes.Repeat([]byte{3}, 999), '\n')
		h := newDigest()
		for range n {
			_, _ = h.Write(line)
		}
		script = fmt.Sprintf(`awk 'BEGIN { pad = sprintf("%%999s", ""); gsub(/ /, "\003", pad); `+
			`for (i = 1; i <= %d; i++) print pad }'`, n)
		return script, h.Sum64(), int64(n) * 1000
	case "line":
		// One line (no newline until the very end): the output JSON carries
		// verbatim, in the fewest and largest notifications.
		h := newDigest()
		chunk := bytes.Repeat([]byte("a"), 1000)
		for range n - 1 {
			_, _ = h.Write(chunk)
		}
		_, _ = h.Write(append(chunk[:999], '\n'))
		script = fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a; echo`, n*1000-1)
		return script, h.Sum64(), int64(n) * 1000
	default:
		b.Fatalf("DAYTONA_BENCH_RELAY_OUTPUT=%q: want text, line or control", kind)
		return "", 0, 0
	}
}

// benchLogFrameSize is the emulator's log frame size for the relay
// benchmarks: DAYTONA_BENCH_LOG_FRAME bytes, else the daemon's 1 KiB.
func benchLogFrameSize(b *testing.B) int {
	v := os.Getenv("DAYTONA_BENCH_LOG_FRAME")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("DAYTONA_BENCH_LOG_FRAME=%q is not a positive integer", v)
	}
	return n
}

// BenchmarkExecuteRelay measures execute.log relay throughput for a command
// printing DAYTONA_BENCH_RELAY_MB (default 100) MB (see relayBenchOutput): from the request to the
// complete reply, every byte verified once in the notifications and once in
// the result. It reports the worker's peak RSS (VmHWM of a fresh worker per
// iteration) in MiB and as a ratio to the output, and, for reference, the
// throughput of our own client following the same command with no worker
// (what the emulator itself can deliver on this machine).
// With DAYTONA_BENCH_WORKER_CPUPROFILE=path each iteration's worker writes
// its CPU profile to path.<iteration>; DAYTONA_BENCH_WORKER_ENV (space-separated
// NAME=value) is added to each worker's environment (GOMAXPROCS, GOGC, ...).
func BenchmarkExecuteRelay(b *testing.B) {
	script, wantSum, size := relayBenchOutput(b)
	env := benchEmulator(b, emulator.Options{LogFrameSize: benchLogFrameSize(b)})
	var elapsed, directElapsed, workerCPU, tail time.Duration
	var busyRelay, busyDirect float64 // CPUs busy, summed over iterations
	var notifications int
	var peak float64
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := startHost(b, hostOptions{hashResults: true, args: workerProfileArgs(i), env: benchWorkerEnv()})
		l := h.acquire(leaseConfig(env, ""))
		cpu0 := procCPU(b, h.w.Pid())
		b.StartTimer()
		start := time.Now()
		busy0 := machineCPU(b)
		p, inv := h.start(l, cmdSpec{command: "sh", args: []string{"-c", script}})
		r := h.result(p, inv)
		elapsed += time.Since(start)
		busyRelay += machineCPU(b).BusySince(busy0)
		b.StopTimer()
		tail += h.replyTime(p).Sub(r.Log.lastAt)
		workerCPU += procCPU(b, h.w.Pid()) - cpu0
		if r.Err != nil || r.StdoutSum == nil || r.StdoutSum.Sum != wantSum || r.Log.outHash.sum() != wantSum {
			b.Fatalf("output mismatch: err %v, result %+v, execute.log %d bytes, want %d bytes", r.Err, r.StdoutSum, r.Log.outHash.n, size)
		}
		hwm, _ := procMemory(b, h.w.Pid())
		peak = max(peak, hwm)
		notifications += r.Log.chunks

		// The same command without the worker.
		tb := directToolbox(b, env, l.id)
		ctx := context.Background()
		if err := tb.CreateSession(ctx, "bench-direct"); err != nil {
			b.Fatal(err)
		}
		hs := newDigest()
		start = time.Now()
		busy0 = machineCPU(b)
		if _, err := directSessionRun(ctx, tb, "bench-direct", "( "+script+" )", hs, io.Discard); err != nil {
			b.Fatal(err)
		}
		directElapsed += time.Since(start)
		busyDirect += machineCPU(b).BusySince(busy0)
		if hs.Sum64() != wantSum {
			b.Fatal("direct output mismatch")
		}
		h.destroy(l)
		h.shutdown()
		b.StartTimer()
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(elapsed), "MB/s-relay")
	b.ReportMetric(mbps(directElapsed), "MB/s-direct")
	// What one core of worker time relays: the ceiling when the worker is
	// not sharing the machine with the emulator and the host.
	b.ReportMetric(mbps(workerCPU), "MB/s-per-worker-cpu")
	b.ReportMetric(float64(notifications)/float64(b.N), "notifications/op")
	// From the last execute.log to the reply: the result carrying the whole
	// output again once the command has ended, a phase the direct client has
	// no counterpart of.
	b.ReportMetric(ms(tail/time.Duration(b.N)), "ms-tail")
	b.ReportMetric(peak, "MiB-peak-rss")
	b.ReportMetric(peak*(1<<20)/float64(size), "rss/output")
	// How many of the machine's CPUs were busy (with anything, other load
	// included) during each side: near the CPU count, a side is CPU-bound.
	b.ReportMetric(busyRelay/float64(b.N), "cpus-busy-relay")
	b.ReportMetric(busyDirect/float64(b.N), "cpus-busy-direct")
}

// machineCPU is the machine's CPU time (procstat.Machine).
func machineCPU(b *testing.B) procstat.CPUTimes {
	b.Helper()
	t, err := procstat.Machine()
	if err != nil {
		b.Skip("no /proc on this system")
	}
	return t
}

// startInProcessHost runs the worker inside the test binary (run, on
// pipes), so that `go test -cpuprofile/-memprofile` sees the worker's side.
func startInProcessHost(b *testing.B, opts hostOptions) *host {
	b.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &inProcessWorker{PipeWriter: inW, done: make(chan int, 1)}
	go func() {
		code := run(nil, inR, outW, io.Discard)
		outW.Close()
		w.done <- code
	}()
	return newHost(b, w, outR, opts)
}

// inProcessWorker is the worker run by startInProcessHost.
type inProcessWorker struct {
	*io.PipeWriter
	done chan int
}

func (w *inProcessWorker) CloseStdin() error { return w.Close() }
func (w *inProcessWorker) Pid() int          { return 0 }

func (w *inProcessWorker) Wait(ctx context.Context) (int, error) {
	select {
	case code := <-w.done:
		return code, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// BenchmarkExecuteRelayInProcess is BenchmarkExecuteRelay with the worker in
// this process, for profiling the relay:
//
//	go test -run '^$' -bench ExecuteRelayInProcess -benchtime 3x -cpuprofile cpu.out ./cmd/daytona-worker/
func BenchmarkExecuteRelayInProcess(b *testing.B) {
	script, wantSum, size := relayBenchOutput(b)
	env := benchEmulator(b, emulator.Options{})
	h := startInProcessHost(b, hostOptions{hashResults: true})
	l := h.acquire(leaseConfig(env, ""))
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := h.execute(l, cmdSpec{command: "sh", args: []string{"-c", script}})
		if r.Err != nil || r.StdoutSum == nil || r.StdoutSum.Sum != wantSum {
			b.Fatalf("output mismatch: err %v", r.Err)
		}
	}
	b.StopTimer()
	h.destroy(l)
	h.shutdown()
}

// burstSize is the shape of BenchmarkExecuteBurst: DAYTONA_BENCH_BURST_LEASES
// leases (100) and DAYTONA_BENCH_BURST_EXECUTES executes (1000).
func burstSize() (leases, executes int) {
	leases, executes = 100, 1000
	if v, err := strconv.Atoi(os.Getenv("DAYTONA_BENCH_BURST_LEASES")); err == nil && v > 0 {
		leases = v
	}
	if v, err := strconv.Atoi(os.Getenv("DAYTONA_BENCH_BURST_EXECUTES")); err == nil && v > 0 {
		executes = v
	}
	return leases, executes
}

// runBurst acquires the leases, sends every execute in one write and checks
// every result; sample is called while they run.
func runBurst(b *testing.B, h *host, env *emulatorEnv, pid int, heapProfile string) {
	leases, executes := burstSize()
	ls := make([]lease, leases)
	var reqs []request
	for range leases {
		p := baseParams(leaseConfig(env, ""))
		p["runId"] = "run-1"
		reqs = append(reqs, request{method: "environmentAcquireLease", params: p})
	}
	for j, p := range h.send(reqs...) {
		r := p.wait()
		if r.Error != nil {
			b.Fatalf("acquire: %v", r.Error)
		}
		res := r.Result.(map[string]any)
		meta := res["metadata"].(map[string]any)
		ls[j] = lease{id: res["providerLeaseId"].(string), remoteCwd: meta["remoteCwd"].(string), cfg: leaseConfig(env, "")}
	}
	var rss0 float64
	var cpu0 time.Duration
	if pid != 0 {
		_, rss0 = procMemory(b, pid)
		cpu0 = procCPU(b, pid)
	}
	reqs = reqs[:0]
	invs := make([]string, executes)
	for j := range executes {
		invs[j] = newInvocation()
		e := cmdSpec{command: "sh", args: []string{"-c", `echo "out $1"; echo "err $1" >&2`, "sh", strconv.Itoa(j)}}
		reqs = append(reqs, request{method: "environmentExecute", params: h.executeParams(ls[j%leases], e), invocation: invs[j]})
	}
	stopSampling := func() {}
	if heapProfile != "" {
		stopSampling = sampleHeapPeak(b, heapProfile)
	}
	start := time.Now()
	ps := h.send(reqs...)
	done := make([]time.Duration, 0, executes)
	first := make([]time.Duration, 0, executes)
	errs := 0
	for j, p := range ps {
		r := h.decode(p.waitFor(10*time.Minute), invs[j])
		done = append(done, h.replyTime(p).Sub(start))
		first = append(first, r.Log.firstAt.Sub(start))
		if r.Err != nil || r.exit() != "0" || r.Stdout != fmt.Sprintf("out %d\n", j) || r.Stderr != fmt.Sprintf("err %d\n", j) || r.LogStdout != r.Stdout || r.LogStderr != r.Stderr {
			errs++
		}
	}
	wall := time.Since(start)
	stopSampling()
	sort.Slice(done, func(i, j int) bool { return done[i] < done[j] })
	sort.Slice(first, func(i, j int) bool { return first[i] < first[j] })
	b.ReportMetric(float64(errs), "errors")
	b.ReportMetric(wall.Seconds(), "s-wall")
	b.ReportMetric(ms(percentile(first, 0.1)), "ms-p10-first")
	b.ReportMetric(ms(percentile(first, 0.5)), "ms-p50-first")
	b.ReportMetric(ms(percentile(done, 0.1)), "ms-p10-done")
	b.ReportMetric(ms(percentile(done, 0.5)), "ms-p50-done")
	b.ReportMetric(ms(percentile(done, 0.9)), "ms-p90-done")
	b.ReportMetric(ms(percentile(done, 0.5))/ms(wall), "p50-done/wall")
	if pid != 0 {
		cpu := procCPU(b, pid) - cpu0
		hwm, _ := procMemory(b, pid)
		time.Sleep(time.Second)
		_, rssAfter := procMemory(b, pid)
		b.ReportMetric(rss0, "MiB-rss-before")
		b.ReportMetric(hwm, "MiB-peak-rss")
		b.ReportMetric(rssAfter, "MiB-rss-after")
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(executes), "ms-cpu/exec")
	}
	for _, l := range ls {
		h.destroy(l)
	}
}

// BenchmarkExecuteBurst sends every execute of burstSize at once to a
// worker process and reports errors, the completion-time distribution, the
// worker's peak RSS and its CPU per execute.
func BenchmarkExecuteBurst(b *testing.B) {
	env := benchEmulator(b, emulator.Options{})
	for i := 0; i < b.N; i++ {
		h := startHost(b, hostOptions{args: workerProfileArgs(i), env: benchWorkerEnv()})
		runBurst(b, h, env, h.w.Pid(), "")
		h.shutdown()
	}
}

// BenchmarkExecuteBurstInProcess is BenchmarkExecuteBurst with the worker in
// this process; DAYTONA_BENCH_HEAP_PROFILE=file writes the heap profile taken
// when the heap in use peaked (the emulator's share included).
func BenchmarkExecuteBurstInProcess(b *testing.B) {
	env := benchEmulator(b, emulator.Options{})
	for i := 0; i < b.N; i++ {
		h := startInProcessHost(b, hostOptions{})
		runBurst(b, h, env, 0, os.Getenv("DAYTONA_BENCH_HEAP_PROFILE"))
		h.shutdown()
	}
}

// sampleHeapPeak samples the heap in use until the returned stop is called
// and writes the profile of its largest sample to path.
func sampleHeapPeak(b *testing.B, path string) (stop func()) {
	quit, finished := make(chan struct{}), make(chan struct{})
	var best bytes.Buffer
	go func() {
		defer close(finished)
		var peak uint64
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak {
				peak = ms.HeapInuse
				best.Reset()
				_ = pprof.Lookup("heap").WriteTo(&best, 0)
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		if err := os.WriteFile(path, best.Bytes(), 0o644); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkIdleRSSAfterBurst sends 20 one-shot commands of 10 MB of output
// each at once (DAYTONA_BENCH_IDLE_BURST_MB changes the size), then watches the idle
// worker's RSS for 10 s. Once the last result is written the worker gives
// the memory back (rpc's idle release), where the runtime alone would keep
// it for minutes. Reported: the fresh worker's RSS, the peak, the RSS 10 s
// after the burst and how long it took to fall within twice the fresh RSS.
func BenchmarkIdleRSSAfterBurst(b *testing.B) {
	const commands = 20
	mb := 10
	if v, err := strconv.Atoi(os.Getenv("DAYTONA_BENCH_IDLE_BURST_MB")); err == nil && v > 0 {
		mb = v
	}
	env := benchEmulator(b, emulator.Options{LogFrameSize: 64 << 10})
	var fresh, peak, after, settle float64
	never := false
	for i := 0; i < b.N; i++ {
		h := startHost(b, hostOptions{hashResults: true})
		_, rss0 := procMemory(b, h.w.Pid())
		fresh = max(fresh, rss0)
		l := h.acquire(leaseConfig(env, ""))
		var reqs []request
		invs := make([]string, commands)
		for j := range commands {
			invs[j] = newInvocation()
			// One-shot, so that all twenty run (and their results are held)
			// at once.
			e := cmdSpec{command: "sh", args: []string{"-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' 'a'", mb<<20)}, bypass: true}
			reqs = append(reqs, request{method: "environmentExecute", params: h.executeParams(l, e), invocation: invs[j]})
		}
		for j, p := range h.send(reqs...) {
			if r := h.decode(p.waitFor(10*time.Minute), invs[j]); r.Err != nil || r.exit() != "0" {
				b.Fatalf("command %d: %v", j, r.Err)
			}
		}
		end := time.Now()
		hwm, _ := procMemory(b, h.w.Pid())
		peak = max(peak, hwm)
		took := -1.0
		var rss float64
		for time.Since(end) < 10*time.Second {
			_, rss = procMemory(b, h.w.Pid())
			if os.Getenv("DAYTONA_BENCH_IDLE_TRACE") != "" {
				b.Logf("%5.2fs %6.1f MiB", time.Since(end).Seconds(), rss)
			}
			if took < 0 && rss <= 2*rss0 {
				took = time.Since(end).Seconds()
			}
			time.Sleep(250 * time.Millisecond)
		}
		after = max(after, rss)
		never = never || took < 0
		settle = max(settle, took)
		h.destroy(l)
		h.shutdown()
	}
	b.ReportMetric(fresh, "MiB-rss-fresh")
	b.ReportMetric(peak, "MiB-peak-rss")
	b.ReportMetric(after, "MiB-rss-idle-10s")
	b.ReportMetric(after/fresh, "idle/fresh")
	if never {
		settle = -1 // some run stayed above twice the fresh RSS for 10 s
	}
	b.ReportMetric(settle, "s-to-2x-fresh")
}
