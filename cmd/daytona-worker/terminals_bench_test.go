package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// directEcho is cat on a raw PTY reached with our own Daytona client, no
// worker: what the PTY path itself costs, for comparison.
type directEcho struct {
	h       *daytona.PtyHandle
	mu      sync.Mutex
	got     int // bytes after the ready marker
	seen    []byte
	ready   bool
	changed chan struct{}
}

var directReady = []byte("\x1b]direct-ready\x07")

func (d *directEcho) Write(p []byte) (int, error) {
	d.mu.Lock()
	if d.ready {
		d.got += len(p)
	} else {
		d.seen = append(d.seen, p...)
		if i := bytes.Index(d.seen, directReady); i >= 0 {
			d.ready = true
			d.got = len(d.seen) - i - len(directReady)
			d.seen = nil
		}
	}
	d.mu.Unlock()
	notifyChange(d.changed)
	return len(p), nil
}

func (d *directEcho) waitFor(b *testing.B, cond func() bool) {
	b.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		ok := cond()
		d.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-d.changed:
		case <-deadline.C:
			b.Fatal("the direct echo stalled")
		}
	}
}

func openDirectEcho(b *testing.B, tb *daytona.Toolbox) *directEcho {
	b.Helper()
	ctx := context.Background()
	id := "bench-direct-" + uuid.NewString()
	if _, err := tb.CreatePty(ctx, daytona.PtyCreateRequest{ID: id, Cols: 120, Rows: 30, LazyStart: true}); err != nil {
		b.Fatal(err)
	}
	d := &directEcho{changed: make(chan struct{}, 1)}
	h, err := tb.ConnectPty(ctx, id, daytona.PtyConnectOptions{Output: d})
	if err != nil {
		b.Fatal(err)
	}
	d.h = h
	if err := h.SendInput(ctx, []byte(`exec 2>/dev/null; stty raw -echo; printf '\033]%s\007' direct-ready; exec cat`+"\r")); err != nil {
		b.Fatal(err)
	}
	d.waitFor(b, func() bool { return d.ready })
	b.Cleanup(func() {
		_ = tb.KillPty(context.Background(), id)
		_ = h.Close()
	})
	return d
}

// echo sends p and waits until it has come back.
func (d *directEcho) echo(b *testing.B, p []byte) {
	b.Helper()
	d.mu.Lock()
	want := d.got + len(p)
	d.mu.Unlock()
	for off := 0; off < len(p); off += 256 << 10 {
		if err := d.h.SendInput(context.Background(), p[off:min(len(p), off+256<<10)]); err != nil {
			b.Fatal(err)
		}
	}
	d.waitFor(b, func() bool { return d.got >= want })
}

// BenchmarkDuplexRoundTrip measures one small write's way to cat and back
// through the worker (duplexChannelWrite → PTY → duplexChannel.data), and
// the same round trip made directly with our Daytona client, alternated so
// both see the same machine. Run it with a fixed count, e.g. -benchtime 300x.
func BenchmarkDuplexRoundTrip(b *testing.B) {
	env := benchEmulator(b, emulator.Options{})
	h := startHost(b, hostOptions{args: workerProfileArgs(0)})
	l := h.acquire(leaseConfig(env, ""))
	defer h.shutdown()
	r, rep := h.openDuplex(l, "cat")
	if rep.Error != nil {
		b.Fatal(rep.Error)
	}
	direct := openDirectEcho(b, directToolbox(b, env, l.id))
	msg := bytes.Repeat([]byte("x"), 64)
	var viaWorker, viaDirect []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got := len(r.bytes())
		start := time.Now()
		r.write(msg)
		r.waitBytes(got + len(msg))
		viaWorker = append(viaWorker, time.Since(start))
		b.StopTimer()
		start = time.Now()
		direct.echo(b, msg)
		viaDirect = append(viaDirect, time.Since(start))
		b.StartTimer()
	}
	b.StopTimer()
	h.closeDuplex(r)
	sort.Slice(viaWorker, func(i, j int) bool { return viaWorker[i] < viaWorker[j] })
	sort.Slice(viaDirect, func(i, j int) bool { return viaDirect[i] < viaDirect[j] })
	b.ReportMetric(ms(percentile(viaWorker, 0.5)), "ms-p50")
	b.ReportMetric(ms(percentile(viaWorker, 0.99)), "ms-p99")
	b.ReportMetric(ms(percentile(viaDirect, 0.5)), "ms-p50-direct")
	b.ReportMetric(ms(percentile(viaDirect, 0.99)), "ms-p99-direct")
}

// duplexBenchBytes is the payload of the throughput benchmarks:
// DAYTONA_BENCH_DUPLEX_MB megabytes (default 8).
func duplexBenchBytes(b *testing.B) int {
	mb := 8
	if v := os.Getenv("DAYTONA_BENCH_DUPLEX_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("DAYTONA_BENCH_DUPLEX_MB=%q", v)
		}
		mb = n
	}
	return mb << 20
}

// BenchmarkDuplexEcho measures throughput both ways: random bytes written
// through the worker to cat and read back, every byte checked, in writes
// of 64 KiB (six fit the host's pending-write bound, so they pipeline). It reports the worker's
// peak RSS (a fresh worker per iteration) and, for reference, the same echo
// made directly with our client (what the PTY path itself allows).
func BenchmarkDuplexEcho(b *testing.B) {
	size := duplexBenchBytes(b)
	payload := make([]byte, size)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}
	env := benchEmulator(b, emulator.Options{})
	var elapsed, directElapsed, workerCPU time.Duration
	var peak float64
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := startHost(b, hostOptions{args: workerProfileArgs(i)})
		l := h.acquire(leaseConfig(env, ""))
		r, rep := h.openDuplex(l, "cat")
		if rep.Error != nil {
			b.Fatal(rep.Error)
		}
		cpu0 := procCPU(b, h.pid)
		b.StartTimer()
		start := time.Now()
		for off := 0; off < size; off += 64 << 10 {
			r.write(payload[off:min(size, off+64<<10)])
		}
		r.waitBytes(size)
		elapsed += time.Since(start)
		b.StopTimer()
		workerCPU += procCPU(b, h.pid) - cpu0
		if !bytes.Equal(r.bytes(), payload) {
			b.Fatal("the echo differs")
		}
		hwm, _ := procMemory(b, h.pid)
		peak = max(peak, hwm)
		h.closeDuplex(r)

		direct := openDirectEcho(b, directToolbox(b, env, l.id))
		start = time.Now()
		direct.echo(b, payload)
		directElapsed += time.Since(start)
		h.destroy(l)
		h.shutdown()
		b.StartTimer()
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(elapsed), "MB/s-echo")
	b.ReportMetric(mbps(directElapsed), "MB/s-direct")
	b.ReportMetric(mbps(workerCPU), "MB/s-per-worker-cpu")
	b.ReportMetric(peak, "MiB-peak-rss")
}
