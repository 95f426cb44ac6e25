package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/jsonstream"
)

// worker is one side of the comparison: how to start it.
type worker struct {
	side string
	argv []string
}

// bench holds what every scenario needs.
type bench struct {
	workers []worker // the two workers, in the order runs alternate them
	// floors are the cold start's yardsticks, each a trivial Go binary
	// that answers its first request and nothing else: the plain one
	// first, then those given of the one linking net/http and the one
	// linking the worker's imports.
	floors []worker
	seed   maphash.Seed
	t      table
	log    io.Writer
	// emulatorBin is the daytona-emulator binary run for each scenario's
	// fresh emulator; empty runs the emulator in this process.
	emulatorBin string
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, format+"\n", args...)
}

// ---- a fresh emulator per run ----

type emu struct {
	apiURL string
	pid    int // the emulator's process when it runs out of process, else 0
	close  func()
}

// startEmulator starts a fresh emulator: the daytona-emulator binary bin as
// its own process when bin is set (so that the worker, the emulator and the
// host are three processes, as in production, and the emulator's CPU is
// neither the host's nor the worker's), else in this process.
func startEmulator(bin string) (*emu, error) {
	if bin != "" {
		return startEmulatorProcess(bin)
	}
	l, err := emulator.ServeLoopback(emulator.Options{})
	if err != nil {
		return nil, err
	}
	return &emu{apiURL: l.APIURL, close: func() { _ = l.Close() }}, nil
}

// startEmulatorProcess runs the daytona-emulator binary (its temporary root
// is removed when it exits on SIGTERM) and reads the API URL from its first
// line.
func startEmulatorProcess(bin string) (*emu, error) {
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-log-level", "warn")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "DAYTONA_API_URL=")
	if err != nil || !ok {
		stop()
		return nil, fmt.Errorf("%s printed %q, not its API URL (%v)", bin, line, err)
	}
	// Nothing more is read from its stdout; it writes nothing more there.
	return &emu{apiURL: url, pid: cmd.Process.Pid, close: stop}, nil
}

// config is an environment config pointing at the emulator; commands may
// run ten minutes (the Node plugin relays 100 MB slowly).
func (e *emu) config() map[string]any {
	return map[string]any{"apiKey": emulator.DevAPIKey, "apiUrl": e.apiURL, "timeoutMs": 600_000}
}

// ---- leases and executes ----

type lease struct {
	id       string
	metadata map[string]any
	cfg      map[string]any
}

func baseParams(cfg map[string]any) map[string]any {
	return map[string]any{"driverKey": "daytona", "companyId": "c-bench", "environmentId": "env-bench", "issueId": "iss-bench", "config": cfg}
}

// acquire acquires n leases at once; the ones that fail are tried again one
// at a time (the comparison is about executes, not acquires).
func acquire(h *host, cfg map[string]any, n int) ([]lease, error) {
	reqs := make([]request, n)
	for i := range reqs {
		p := baseParams(cfg)
		p["runId"] = "run-bench"
		reqs[i] = request{method: "environmentAcquireLease", params: p}
	}
	chans, err := h.send(reqs...)
	if err != nil {
		return nil, err
	}
	leases := make([]lease, 0, n)
	for i, ch := range chans {
		r, err := h.wait(ch, 5*time.Minute)
		for attempt := 0; err == nil && r.Error != nil && attempt < 3; attempt++ {
			r, err = h.call(reqs[i].method, reqs[i].params, "", 5*time.Minute)
		}
		if err != nil {
			return nil, fmt.Errorf("acquire: %w", err)
		}
		if r.Error != nil {
			return nil, fmt.Errorf("acquire: %v", r.Error)
		}
		res, _ := r.Result.(map[string]any)
		id, _ := res["providerLeaseId"].(string)
		meta, _ := res["metadata"].(map[string]any)
		leases = append(leases, lease{id: id, metadata: meta, cfg: cfg})
	}
	return leases, nil
}

func destroy(h *host, leases []lease) {
	reqs := make([]request, len(leases))
	for i, l := range leases {
		p := baseParams(l.cfg)
		p["providerLeaseId"] = l.id
		p["leaseMetadata"] = l.metadata
		reqs[i] = request{method: "environmentDestroyLease", params: p}
	}
	chans, err := h.send(reqs...)
	if err != nil {
		return
	}
	for _, ch := range chans {
		_, _ = h.wait(ch, 5*time.Minute)
	}
}

func executeRequest(l lease, invocation, command string, args ...string) request {
	p := baseParams(l.cfg)
	p["lease"] = map[string]any{"providerLeaseId": l.id, "metadata": l.metadata, "expiresAt": nil}
	p["command"] = command
	p["args"] = args
	return request{method: "environmentExecute", params: p, invocation: invocation}
}

// outcome is a decoded execute reply.
type outcome struct {
	exitCode       string
	stdout, stderr uint64 // digests of the result's outputs
	stdoutLen      int64
	rpcErr         map[string]any
}

func decodeExecute(r reply, seed maphash.Seed) outcome {
	if r.Error != nil {
		return outcome{rpcErr: r.Error}
	}
	res, _ := r.Result.(map[string]any)
	o := outcome{exitCode: fmt.Sprint(res["exitCode"])}
	for _, f := range []struct {
		key string
		sum *uint64
		n   *int64
	}{{"stdout", &o.stdout, &o.stdoutLen}, {"stderr", &o.stderr, nil}} {
		switch v := res[f.key].(type) {
		case jsonstream.Text:
			*f.sum = v.Sum
			if f.n != nil {
				*f.n = v.N
			}
		case string:
			*f.sum = maphash.String(seed, v)
			if f.n != nil {
				*f.n = int64(len(v))
			}
		}
	}
	return o
}

// setUp starts an emulator and a worker, initializes it and acquires n
// leases.
func (b *bench) setUp(w worker, n int) (*emu, *host, []lease, error) {
	e, err := startEmulator(b.emulatorBin)
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := startHost(w.argv, b.seed)
	if err != nil {
		e.close()
		return nil, nil, nil, err
	}
	if _, err := h.initialize(); err != nil {
		h.stop()
		e.close()
		return nil, nil, nil, err
	}
	leases, err := acquire(h, e.config(), n)
	if err != nil {
		h.stop()
		e.close()
		return nil, nil, nil, err
	}
	return e, h, leases, nil
}

// ---- cold start ----

// coldStart measures spawn → initialize reply, with the peak memory and the
// CPU the process had used by then, for both workers and the trivial Go
// binaries (b.floors), in turn.
func (b *bench) coldStart(runs int) error {
	const scenario = "cold start"
	sides := slices.Concat(b.workers, b.floors)
	for run := range runs {
		for i, w := range sides {
			start := time.Now()
			h, err := startHost(w.argv, b.seed)
			if err != nil {
				return err
			}
			at, err := h.initialize()
			if err != nil {
				h.stop()
				return fmt.Errorf("%s: %w", w.side, err)
			}
			peak, _, _ := procMemory(h.pid)
			cpu, _ := procCPU(h.pid)
			faults, _ := procFaults(h.pid)
			if i >= len(b.workers) {
				h.hangUp() // a floor answers nothing but its first request
			} else {
				h.stop()
			}
			b.t.add(scenario, "spawn → initialize reply", "ms", w.side, ms(at.Sub(start)))
			b.t.add(scenario, "peak RSS", "MiB", w.side, peak)
			b.t.add(scenario, "CPU to the reply", "ms", w.side, ms(cpu))
			b.t.add(scenario, "page faults to the reply", "", w.side, faults)
		}
		b.progress("cold start: run %d/%d", run+1, runs)
	}
	return nil
}

// ---- one command at a time ----

// executeLatency runs `true` in a lease's session n times, one at a time,
// after three warm-up runs: the round trip through the worker and the
// worker's CPU per command.
func (b *bench) executeLatency(runs, n int) error {
	const scenario = "execute `true`, one at a time"
	for run := range runs {
		for _, w := range b.workers {
			e, h, leases, err := b.setUp(w, 1)
			if err != nil {
				return fmt.Errorf("%s: %w", w.side, err)
			}
			err = func() error {
				defer e.close()
				defer h.stop()
				l := leases[0]
				one := func(i int) (time.Duration, error) {
					start := time.Now()
					r, err := h.call("environmentExecute", executeRequest(l, fmt.Sprintf("inv-%d", i), "true").params, fmt.Sprintf("inv-%d", i), 5*time.Minute)
					if err != nil {
						return 0, err
					}
					if o := decodeExecute(r, b.seed); o.rpcErr != nil || o.exitCode != "0" {
						return 0, fmt.Errorf("execute true: %+v", o)
					}
					return r.At.Sub(start), nil
				}
				for i := range 3 {
					if _, err := one(i); err != nil {
						return err
					}
				}
				cpu0, _ := procCPU(h.pid)
				faults0, _ := procFaults(h.pid)
				var lat []float64
				for i := range n {
					d, err := one(100 + i)
					if err != nil {
						return err
					}
					lat = append(lat, ms(d))
				}
				cpu1, _ := procCPU(h.pid)
				faults1, _ := procFaults(h.pid)
				slices.Sort(lat)
				b.t.add(scenario, "round trip, median of "+strconv.Itoa(n), "ms", w.side, median(lat))
				b.t.add(scenario, "worker CPU per command", "ms", w.side, ms(cpu1-cpu0)/float64(n))
				b.t.add(scenario, "worker page faults per command", "", w.side, (faults1-faults0)/float64(n))
				destroy(h, leases)
				return nil
			}()
			if err != nil {
				return fmt.Errorf("%s: %w", w.side, err)
			}
		}
		b.progress("execute latency: run %d/%d", run+1, runs)
	}
	return nil
}

// ---- relay ----

// relayOutput is a command and the stdout it prints.
type relayOutput struct {
	name   string
	script string
	sum    uint64
	size   int64
}

// relayOutputs are the outputs relayed: mb MB of 1000-byte lines, one line
// of mb MB, and controlMB MB of lines of control bytes and multi-byte UTF-8
// (every kind of escape, and runes cut by the daemon's 1 KiB frames).
func relayOutputs(seed maphash.Seed, mb, controlMB int) []relayOutput {
	repeat := func(line []byte, n int) (uint64, int64) {
		var h maphash.Hash
		h.SetSeed(seed)
		for range n {
			_, _ = h.Write(line)
		}
		return h.Sum64(), int64(n * len(line))
	}
	var outs []relayOutput

	// Numbered lines of 1000 bytes.
	n := mb * 1000
	{
		var h maphash.Hash
		h.SetSeed(seed)
		line := []byte(fmt.Sprintf("%09d %s\n", 0, strings.Repeat("a", 989)))
		for i := 1; i <= n; i++ {
			copy(line, fmt.Sprintf("%09d", i))
			_, _ = h.Write(line)
		}
		outs = append(outs, relayOutput{
			name: fmt.Sprintf("%d MB of lines", mb),
			script: fmt.Sprintf(`awk 'BEGIN { pad = sprintf("%%989s", ""); gsub(/ /, "a", pad); `+
				`for (i = 1; i <= %d; i++) printf "%%09d %%s\n", i, pad }'`, n),
			sum: h.Sum64(), size: int64(n) * 1000,
		})
	}

	// One line of mb MB.
	{
		var h maphash.Hash
		h.SetSeed(seed)
		chunk := []byte(strings.Repeat("b", 1000))
		for range n {
			_, _ = h.Write(chunk)
		}
		_, _ = h.Write([]byte{'\n'})
		outs = append(outs, relayOutput{
			name: fmt.Sprintf("one %d MB line", mb),
			script: fmt.Sprintf(`awk 'BEGIN { pad = sprintf("%%1000s", ""); gsub(/ /, "b", pad); `+
				`for (i = 1; i <= %d; i++) printf "%%s", pad; print "" }'`, n),
			sum: h.Sum64(), size: int64(n)*1000 + 1,
		})
	}

	// Control bytes (each six bytes of JSON), tabs, DEL, and two-, three-
	// and four-byte UTF-8, in lines of 1000 bytes. \x01 and \x02 are left
	// out: three in a row are the log format's stream markers.
	{
		var unit []byte
		for c := byte(3); c < 0x20; c++ {
			if c != '\n' {
				unit = append(unit, c)
			}
		}
		unit = append(unit, 0x7f)
		unit = append(unit, "é日本語🎉\"\\"...)
		var line []byte
		for len(line)+len(unit) < 999 {
			line = append(line, unit...)
		}
		for len(line) < 999 {
			line = append(line, 'x')
		}
		line = append(line, '\n')
		lines := controlMB * 1000
		sum, size := repeat(line, lines)
		var octal strings.Builder
		for _, c := range line[:len(line)-1] {
			fmt.Fprintf(&octal, `\%03o`, c)
		}
		outs = append(outs, relayOutput{
			name:   fmt.Sprintf("%d MB of control bytes and UTF-8", controlMB),
			script: fmt.Sprintf(`awk 'BEGIN { l = "%s"; for (i = 1; i <= %d; i++) print l }'`, octal.String(), lines),
			sum:    sum, size: size,
		})
	}
	return outs
}

// relay has each worker run each output's command on a fresh worker and a
// fresh emulator: throughput from request to reply, the worker's CPU and
// peak memory, and whether the result and the stream carry the output byte
// for byte. Our own client follows the same command right after the
// daytona-worker run, for what the emulator delivers without a worker.
func (b *bench) relay(runs int, outs []relayOutput) error {
	for _, out := range outs {
		scenario := "relay: " + out.name
		for run := range runs {
			for _, w := range b.workers {
				if err := b.relayOnce(scenario, w, out); err != nil {
					return fmt.Errorf("%s, %s: %w", scenario, w.side, err)
				}
			}
			b.progress("%s: run %d/%d", scenario, run+1, runs)
		}
	}
	return nil
}

func (b *bench) relayOnce(scenario string, w worker, out relayOutput) error {
	e, h, leases, err := b.setUp(w, 1)
	if err != nil {
		return err
	}
	defer e.close()
	defer h.stop()
	l := leases[0]
	cpu0, _ := procCPU(h.pid)
	faults0, _ := procFaults(h.pid)
	written0, _ := procWritten(h.pid)
	hostCPU0, _ := procCPU(os.Getpid())
	emuCPU0, _ := procCPU(e.pid)
	start := time.Now()
	r, err := h.call("environmentExecute", executeRequest(l, "inv-relay", "sh", "-c", out.script).params, "inv-relay", 20*time.Minute)
	if err != nil {
		return err
	}
	elapsed := r.At.Sub(start)
	cpu1, _ := procCPU(h.pid)
	written1, _ := procWritten(h.pid)
	hostCPU1, _ := procCPU(os.Getpid())
	emuCPU1, _ := procCPU(e.pid)
	faults1, _ := procFaults(h.pid)
	peak, _, _ := procMemory(h.pid)
	o := decodeExecute(r, b.seed)
	if o.rpcErr != nil {
		return fmt.Errorf("execute: %v", o.rpcErr)
	}
	streamed := h.streamed("inv-relay")
	mb := float64(out.size) / 1e6
	b.t.add(scenario, "throughput", "MB/s", w.side, mb/elapsed.Seconds())
	// What the worker had to write for it: the output twice (the
	// notifications and the result), escaped for JSON, so about 2 bytes per
	// byte of text and up to 12 per control byte (\u00XX). The direct
	// client's yardstick reads the output once, unescaped.
	wroteMB := (written1 - written0) / 1e6
	b.t.add(scenario, "worker wrote", "MB", w.side, wroteMB)
	b.t.add(scenario, "worker wrote, per second", "MB/s", w.side, wroteMB/elapsed.Seconds())
	b.t.add(scenario, "worker CPU", "s", w.side, (cpu1 - cpu0).Seconds())
	b.t.add(scenario, "worker page faults", "", w.side, faults1-faults0)
	// Where the rest of the two cores went: the host reading the worker's
	// stdout (and the emulator, when it runs inside this process), and the
	// emulator when it runs as its own process.
	b.t.add(scenario, "host CPU", "s", w.side, (hostCPU1 - hostCPU0).Seconds())
	if e.pid != 0 {
		b.t.add(scenario, "emulator CPU", "s", w.side, (emuCPU1 - emuCPU0).Seconds())
		// Everything the relay costs outside Daytona, beside what our
		// client costs for the same output.
		b.t.add(scenario, "worker + host CPU", "s", w.side, (cpu1 - cpu0 + hostCPU1 - hostCPU0).Seconds())
	}
	b.t.add(scenario, "peak RSS", "MiB", w.side, peak)
	b.t.add(scenario, "execute.log notifications", "", w.side, float64(streamed.chunks))
	b.t.add(scenario, "result byte-exact", unitYesNo, w.side, boolNum(o.stdout == out.sum && o.stdoutLen == out.size))
	b.t.add(scenario, "execute.log byte-exact", unitYesNo, w.side, boolNum(streamed.stdout.sum(b.seed) == out.sum && streamed.stdout.n == out.size))
	if w.side == sideGo {
		clientCPU0, _ := procCPU(os.Getpid())
		direct, err := directRelay(e, l.id, out, b.seed)
		if err != nil {
			return fmt.Errorf("direct client: %w", err)
		}
		clientCPU1, _ := procCPU(os.Getpid())
		b.t.add(scenario, "throughput", "MB/s", sideDirect, mb/direct.Seconds())
		if e.pid != 0 {
			// This process is then our client alone (the host is idle).
			b.t.add(scenario, "worker + host CPU", "s", sideDirect, (clientCPU1 - clientCPU0).Seconds())
		}
	}
	destroy(h, leases)
	return nil
}

func boolNum(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// directRelay runs the command with our own client as the worker does
// (dispatch while the log stream's connection is prepared, follow, exit
// code) and returns how long it took.
func directRelay(e *emu, sandboxID string, out relayOutput, seed maphash.Seed) (time.Duration, error) {
	ctx := context.Background()
	c, err := daytona.New(daytona.Config{APIKey: emulator.DevAPIKey, APIURL: e.apiURL})
	if err != nil {
		return 0, err
	}
	sb, err := c.Get(ctx, sandboxID)
	if err != nil {
		return 0, err
	}
	tb := c.Toolbox(sb)
	if err := tb.CreateSession(ctx, "bench-direct"); err != nil {
		return 0, err
	}
	var h maphash.Hash
	h.SetSeed(seed)
	start := time.Now()
	prepared := tb.PrepareLogStream(ctx)
	defer prepared.Close()
	cmd, err := tb.SessionExec(ctx, "bench-direct", daytona.SessionExecRequest{Command: "( " + out.script + " )", Async: true})
	if err != nil {
		return 0, err
	}
	if _, err := tb.FollowSessionCommandLogs(ctx, "bench-direct", cmd.CmdID, daytona.FollowOptions{Stdout: &h, Prepared: prepared}); err != nil {
		return 0, err
	}
	if _, err := tb.GetSessionCommand(ctx, "bench-direct", cmd.CmdID); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	if h.Sum64() != out.sum {
		return 0, errors.New("output differs")
	}
	return elapsed, nil
}

// ---- a burst ----

// burst acquires nLeases leases, sends nExecutes executes at once (spread
// over the leases in turn) and checks every result and stream.
func (b *bench) burst(runs, nLeases, nExecutes int) error {
	scenario := fmt.Sprintf("burst: %d leases, %d executes at once", nLeases, nExecutes)
	for run := range runs {
		for _, w := range b.workers {
			if err := b.burstOnce(scenario, w, nLeases, nExecutes); err != nil {
				return fmt.Errorf("%s, %s: %w", scenario, w.side, err)
			}
		}
		b.progress("%s: run %d/%d", scenario, run+1, runs)
	}
	return nil
}

func (b *bench) burstOnce(scenario string, w worker, nLeases, nExecutes int) error {
	e, h, leases, err := b.setUp(w, nLeases)
	if err != nil {
		return err
	}
	defer e.close()
	defer h.stop()
	_, rssBefore, _ := procMemory(h.pid)
	reqs := make([]request, nExecutes)
	for i := range reqs {
		reqs[i] = executeRequest(leases[i%len(leases)], "inv-"+strconv.Itoa(i), "sh", "-c", `echo "out $1"; echo "err $1" >&2`, "sh", strconv.Itoa(i))
	}
	cpu0, _ := procCPU(h.pid)
	start := time.Now()
	chans, err := h.send(reqs...)
	if err != nil {
		return err
	}
	var failed, inexact int
	done := make([]float64, 0, nExecutes)
	var last time.Time
	for i, ch := range chans {
		r, err := h.wait(ch, 30*time.Minute)
		if err != nil {
			return err
		}
		done = append(done, r.At.Sub(start).Seconds())
		if r.At.After(last) {
			last = r.At
		}
		o := decodeExecute(r, b.seed)
		if o.rpcErr != nil {
			failed++
			continue
		}
		wantOut, wantErr := maphash.String(b.seed, fmt.Sprintf("out %d\n", i)), maphash.String(b.seed, fmt.Sprintf("err %d\n", i))
		s := h.streamed("inv-" + strconv.Itoa(i))
		if o.exitCode != "0" || o.stdout != wantOut || o.stderr != wantErr || s.stdout.sum(b.seed) != wantOut || s.stderr.sum(b.seed) != wantErr {
			inexact++
		}
	}
	wall := last.Sub(start).Seconds()
	cpu1, _ := procCPU(h.pid)
	peak, _, _ := procMemory(h.pid)
	time.Sleep(2 * time.Second)
	_, rssAfter, _ := procMemory(h.pid)
	slices.Sort(done)
	pct := func(p float64) float64 { return done[int(float64(len(done)-1)*p)] }
	b.t.add(scenario, "JSON-RPC errors", "", w.side, float64(failed))
	b.t.add(scenario, "results or streams not exact", "", w.side, float64(inexact))
	b.t.add(scenario, "wall, first request to last reply", "s", w.side, wall)
	b.t.add(scenario, "10% of the commands complete by", "s", w.side, pct(0.1))
	b.t.add(scenario, "50% complete by", "s", w.side, pct(0.5))
	b.t.add(scenario, "90% complete by", "s", w.side, pct(0.9))
	b.t.add(scenario, "median completion ÷ wall", "", w.side, pct(0.5)/wall)
	b.t.add(scenario, "worker CPU per execute", "ms", w.side, ms(cpu1-cpu0)/float64(nExecutes))
	b.t.add(scenario, "RSS before the burst", "MiB", w.side, rssBefore)
	b.t.add(scenario, "peak RSS", "MiB", w.side, peak)
	b.t.add(scenario, "RSS 2 s after the last reply", "MiB", w.side, rssAfter)
	destroy(h, leases)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
