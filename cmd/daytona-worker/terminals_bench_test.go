package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
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

// rawDuplex is a duplex channel driven over the worker's pipes with as
// little host machinery as there can be: request lines written as they
// are, output lines scanned rather than parsed.
type rawDuplex struct {
	p        *benchProc
	sid      string
	writeFor map[string][]byte // write line by message, for round trips
}

func openRawDuplex(b *testing.B, env *emulatorEnv, args ...string) *rawDuplex {
	b.Helper()
	p := startBenchWorker(b)
	p.initialize(b)
	call := func(line string) map[string]any {
		if _, err := io.WriteString(p, line+"\n"); err != nil {
			b.Fatal(err)
		}
		for {
			raw, err := p.out.ReadBytes('\n')
			if err != nil {
				b.Fatal(err)
			}
			var m map[string]any
			if json.Unmarshal(raw, &m) == nil && m["id"] != nil {
				if m["error"] != nil {
					b.Fatalf("%s: %v", line, m["error"])
				}
				res, _ := m["result"].(map[string]any)
				return res
			}
		}
	}
	base := fmt.Sprintf(`"driverKey":"daytona","companyId":"c-1","environmentId":"env-1","config":%s`, leaseConfig(env, ""))
	lease := call(`{"jsonrpc":"2.0","id":"a","method":"environmentAcquireLease","params":{` + base + `,"runId":"r"}}`)
	id, _ := lease["providerLeaseId"].(string)
	open := call(`{"jsonrpc":"2.0","id":"o","method":"duplexChannelOpen","params":{"hostRouteId":"duplex-route-1","driverKey":"daytona","companyId":"c-1","environmentId":"env-1","providerLeaseId":"` + id + `","command":["cat"]}}`)
	d := &rawDuplex{p: p, writeFor: map[string][]byte{}}
	d.sid, _ = open["workerSessionId"].(string)
	b.Cleanup(func() {
		call(`{"jsonrpc":"2.0","id":"c","method":"duplexChannelClose","params":{"hostRouteId":"duplex-route-1"}}`)
		call(`{"jsonrpc":"2.0","id":"d","method":"environmentDestroyLease","params":{` + base + `,"providerLeaseId":"` + id + `"}}`)
		p.stop()
	})
	return d
}

// writeLine is a duplexChannelWrite of msg (its id never changes: replies
// are only counted).
func (d *rawDuplex) writeLine(msg []byte) []byte {
	return []byte(`{"jsonrpc":"2.0","id":"w","method":"duplexChannelWrite","params":{"hostRouteId":"duplex-route-1","workerSessionId":"` +
		d.sid + `","data":"` + base64.StdEncoding.EncodeToString(msg) + `"}}` + "\n")
}

var (
	writeReply = []byte(`{"jsonrpc":"2.0","id":"w",`)
	chunkKey   = []byte(`"chunk":"`)
)

// roundTrip writes msg and waits for its echo.
func (d *rawDuplex) roundTrip(b *testing.B, msg []byte) {
	line := d.writeFor[string(msg)]
	if line == nil {
		line = d.writeLine(msg)
		d.writeFor[string(msg)] = line
	}
	want := append(append([]byte(nil), chunkKey...), base64.StdEncoding.EncodeToString(msg)...)
	if _, err := d.p.Write(line); err != nil {
		b.Fatal(err)
	}
	for {
		out, err := d.p.out.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(out, want) {
			return
		}
	}
}

// echo writes payload in 64 KiB writes, keeping at most the host's 393,216
// bytes of writes unanswered, while a reader decodes the echo; it returns
// what came back.
func (d *rawDuplex) echo(b *testing.B, payload []byte) []byte {
	const piece = 64 << 10
	answered := make(chan int, len(payload)/piece+1)
	got := make(chan []byte, 1)
	go func() {
		var back []byte
		buf := make([]byte, base64.StdEncoding.DecodedLen(duplexPiece*2))
		for len(back) < len(payload) {
			line, err := d.p.out.ReadSlice('\n')
			if err != nil {
				break
			}
			if bytes.HasPrefix(line, writeReply) {
				answered <- 1
				continue
			}
			i := bytes.Index(line, chunkKey)
			if i < 0 {
				continue
			}
			enc := line[i+len(chunkKey):]
			enc = enc[:bytes.IndexByte(enc, '"')]
			n, err := base64.StdEncoding.Decode(buf, enc)
			if err != nil {
				break
			}
			back = append(back, buf[:n]...)
		}
		got <- back
	}()
	pending := 0
	for off := 0; off < len(payload); off += piece {
		msg := payload[off:min(len(payload), off+piece)]
		for pending+len(msg) > hostMaxDuplexPendingBytes {
			<-answered
			pending -= piece
		}
		if _, err := d.p.Write(d.writeLine(msg)); err != nil {
			b.Fatal(err)
		}
		pending += len(msg)
	}
	return <-got
}

const duplexPiece = 192 << 10 // the worker's largest data chunk

// BenchmarkDuplexRoundTrip measures one small write's way to cat and back
// through the worker (duplexChannelWrite → PTY → duplexChannel.data), with
// a host that only writes a fixed line and scans for the echo, and the same
// round trip made directly with our Daytona client, alternated so both see
// the same machine. Run it with a fixed count, e.g. -benchtime 300x.
func BenchmarkDuplexRoundTrip(b *testing.B) {
	env := benchEmulator(b, emulator.Options{})
	msg := bytes.Repeat([]byte("x"), 64)
	viaWorker := openRawDuplex(b, env)
	dsb, err := daytona.New(daytona.Config{APIKey: env.APIKey, APIURL: env.APIURL})
	if err != nil {
		b.Fatal(err)
	}
	sbx, err := dsb.CreateAndWait(context.Background(), daytona.CreateParams{}, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	direct := openDirectEcho(b, dsb.Toolbox(sbx))
	var worker, directTimes []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		viaWorker.roundTrip(b, msg)
		worker = append(worker, time.Since(start))
		b.StopTimer()
		start = time.Now()
		direct.echo(b, msg)
		directTimes = append(directTimes, time.Since(start))
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(worker, func(i, j int) bool { return worker[i] < worker[j] })
	sort.Slice(directTimes, func(i, j int) bool { return directTimes[i] < directTimes[j] })
	b.ReportMetric(ms(percentile(worker, 0.5)), "ms-p50")
	b.ReportMetric(ms(percentile(worker, 0.99)), "ms-p99")
	b.ReportMetric(ms(percentile(directTimes, 0.5)), "ms-p50-direct")
	b.ReportMetric(ms(percentile(directTimes, 0.99)), "ms-p99-direct")
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
// through the worker to cat and read back, every byte checked, in 64 KiB
// writes with at most the host's pending-write bound unanswered, by a host
// that scans lines rather than parsing them. It reports the worker's peak
// RSS (a fresh worker per iteration) and, for reference, the same echo made
// directly with our client (what the PTY path itself allows).
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
		d := openRawDuplex(b, env)
		pid := d.p.Pid()
		cpu0 := procCPU(b, pid)
		b.StartTimer()
		start := time.Now()
		back := d.echo(b, payload)
		elapsed += time.Since(start)
		b.StopTimer()
		workerCPU += procCPU(b, pid) - cpu0
		if !bytes.Equal(back, payload) {
			b.Fatalf("the echo differs (%d bytes back of %d)", len(back), len(payload))
		}
		hwm, _ := procMemory(b, pid)
		peak = max(peak, hwm)

		c, err := daytona.New(daytona.Config{APIKey: env.APIKey, APIURL: env.APIURL})
		if err != nil {
			b.Fatal(err)
		}
		sbx, err := c.CreateAndWait(context.Background(), daytona.CreateParams{}, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		direct := openDirectEcho(b, c.Toolbox(sbx))
		start = time.Now()
		direct.echo(b, payload)
		directElapsed += time.Since(start)
		b.StartTimer()
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(elapsed), "MB/s-echo")
	b.ReportMetric(mbps(directElapsed), "MB/s-direct")
	b.ReportMetric(mbps(workerCPU), "MB/s-per-worker-cpu")
	b.ReportMetric(peak, "MiB-peak-rss")
}
