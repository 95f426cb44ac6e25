package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
)

// Sync benchmarks: the real worker binary syncing a tree of
// DAYTONA_BENCH_SYNC_FILES files (default 10,000) totalling
// DAYTONA_BENCH_SYNC_MB MB (default 1024), or one file of that size, into a
// fresh sandbox and back out, then the same tree again into the same lease
// (incremental). Each iteration also times our own client uploading and
// downloading the same number of bytes to the same emulator without the
// worker (the emulator's raw throughput on this machine), so the ratio is
// measured under the same load. DAYTONA_BENCH_SYNC_CONTENT is "mixed"
// (default: half the files random bytes, half text), "random" or "text".
// The worker's peak RSS is its VmHWM (a fresh worker per iteration).

func benchEnvInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s must be a positive integer", name)
		}
		return n
	}
	return def
}

// fillContent writes n bytes of benchmark content: random, or text that
// compresses about 4:1.
func fillContent(w io.Writer, n int64, random bool, seed uint64) error {
	buf := make([]byte, 256<<10)
	x := seed | 1
	for n > 0 {
		chunk := buf[:min(int64(len(buf)), n)]
		if random {
			for i := 0; i+8 <= len(chunk); i += 8 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				for k := 0; k < 8; k++ {
					chunk[i+k] = byte(x >> (8 * k))
				}
			}
		} else {
			words := []string{"func ", "return ", "err ", "nil", "\n\t", "if ", "{ ", "} ", "package main\n", "x := ", "for i := 0; "}
			for i := 0; i < len(chunk); {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				i += copy(chunk[i:], words[x%uint64(len(words))])
				if x%7 == 0 && i < len(chunk) {
					i += copy(chunk[i:], strconv.FormatUint(x%100000, 10))
				}
			}
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		n -= int64(len(chunk))
	}
	return nil
}

// makeBenchTree writes the benchmark tree (files in folders of 100).
func makeBenchTree(b *testing.B, root string, files int, total int64, content string) {
	b.Helper()
	per := total / int64(files)
	for i := 0; i < files; i++ {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%05d.dat", i)))
		if err != nil {
			b.Fatal(err)
		}
		random := content == "random" || (content == "mixed" && i%2 == 0)
		if err := fillContent(f, per, random, uint64(i)*0x9E3779B97F4A7C15); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// treeSize counts the regular files below root and their bytes.
func treeSize(b *testing.B, root string) (files int, bytes int64) {
	b.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			files++
			bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return files, bytes
}

// benchSync runs one traced sync call and returns its result, its wall
// time and the wall time of its transfer span.
func benchSync(b *testing.B, h *host, method string, params map[string]any) (map[string]any, time.Duration, time.Duration) {
	b.Helper()
	inv := newInvocation()
	start := time.Now()
	rep := h.send(request{method: method, params: params, invocation: inv, traceparent: traceparent})[0].wait()
	elapsed := time.Since(start)
	if rep.Error != nil {
		b.Fatalf("%s: %v", method, rep.Error)
	}
	res := plain(rep.Result).(map[string]any)["operations"].([]any)[0].(map[string]any)
	var transfer time.Duration
	var steps []string
	deadline := time.Now().Add(30 * time.Second)
	for transfer == 0 && time.Now().Before(deadline) {
		steps = steps[:0]
		for _, s := range h.recordedSpans(inv) {
			s := plain(s).(map[string]any)
			steps = append(steps, fmt.Sprintf("%s %.0fms", s["name"], s["endTimeMs"].(float64)-s["startTimeMs"].(float64)))
			if s["name"] == "transfer" {
				transfer += time.Duration(s["attributes"].(map[string]any)["paperclip.sandbox.startup.transfer.wall_ms"].(float64)) * time.Millisecond
			}
		}
		if transfer == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	b.Logf("%s %s: %s; %v", method, elapsed.Round(time.Millisecond), strings.Join(steps, ", "), res)
	return res, elapsed, transfer
}

func syncBenchParams(l lease, kind, src, dst string) map[string]any {
	p := baseParams(l.cfg)
	p["lease"] = map[string]any{"providerLeaseId": l.id, "metadata": map[string]any{"remoteCwd": l.remoteCwd}}
	p["operations"] = []any{map[string]any{"operationId": "bench", "files": []any{
		map[string]any{"sourcePath": src, "targetPath": dst, "kind": kind},
	}}}
	return p
}

// rawTransfer times our own client uploading n bytes to the emulator and
// downloading them into a host file (one file, no worker): the emulator's
// raw throughput, disk writes on both ends as for a sync.
func rawTransfer(b *testing.B, env *emulatorEnv, sandboxID, remote string, n int64) (up, down time.Duration) {
	b.Helper()
	tb := directToolbox(b, env, sandboxID)
	ctx := context.Background()
	path := filepath.Join(remote, "raw.bin")
	start := time.Now()
	if _, err := tb.UploadFiles(ctx, []daytona.Upload{{Path: path, Reader: io.LimitReader(repeatReader{}, n)}}); err != nil {
		b.Fatal(err)
	}
	up = time.Since(start)
	local, err := os.Create(filepath.Join(b.TempDir(), "raw.bin"))
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(local.Name())
	start = time.Now()
	res, err := tb.DownloadFiles(ctx, []daytona.Download{{Path: path, Writer: local}})
	if cerr := local.Close(); err == nil {
		err = cerr
	}
	if err != nil || res[0].Err != nil || res[0].Bytes != n {
		b.Fatalf("raw download: %v %+v", err, res)
	}
	down = time.Since(start)
	if err := tb.DeleteFile(ctx, path, false); err != nil {
		b.Fatal(err)
	}
	return up, down
}

type syncBenchTotals struct {
	in, inTransfer, out, outTransfer, again, rawUp, rawDown time.Duration
	againBytes, firstBytes                                  float64
	peak                                                    float64
	workerCPU                                               time.Duration
}

func (t *syncBenchTotals) report(b *testing.B, size int64) {
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(t.in), "MB/s-in")
	b.ReportMetric(mbps(t.inTransfer), "MB/s-in-transfer")
	b.ReportMetric(mbps(t.out), "MB/s-out")
	b.ReportMetric(mbps(t.outTransfer), "MB/s-out-transfer")
	b.ReportMetric(mbps(t.rawUp), "MB/s-raw-upload")
	b.ReportMetric(mbps(t.rawDown), "MB/s-raw-download")
	b.ReportMetric(t.rawUp.Seconds()/t.in.Seconds(), "in/raw")
	b.ReportMetric(t.rawUp.Seconds()/t.inTransfer.Seconds(), "in-transfer/raw")
	b.ReportMetric(t.rawDown.Seconds()/t.out.Seconds(), "out/raw")
	b.ReportMetric(t.again.Seconds()/float64(b.N), "s-incremental")
	b.ReportMetric(100*t.againBytes/float64(size)/float64(b.N), "%-sent-incremental")
	b.ReportMetric(t.peak, "MiB-peak-rss")
	b.ReportMetric(t.workerCPU.Seconds()/float64(b.N), "worker-cpu-s")
}

// endRound adds what a round's worker used, and the emulator's raw transfer
// of size bytes each way (timed after the syncs, in the same sandbox), then
// ends the round's lease and worker.
func (t *syncBenchTotals) endRound(b *testing.B, h *host, env *emulatorEnv, l lease, size int64) {
	b.Helper()
	hwm, _ := procMemory(b, h.w.Pid())
	t.peak = max(t.peak, hwm)
	t.workerCPU += procCPU(b, h.w.Pid())
	up, down := rawTransfer(b, env, l.id, l.remoteCwd, size)
	t.rawUp, t.rawDown = t.rawUp+up, t.rawDown+down
	h.destroy(l)
	h.shutdown()
}

// BenchmarkSyncTree syncs the tree in (full, then incremental) and out.
func BenchmarkSyncTree(b *testing.B) {
	files := benchEnvInt(b, "DAYTONA_BENCH_SYNC_FILES", 10_000)
	size := int64(benchEnvInt(b, "DAYTONA_BENCH_SYNC_MB", 1024)) << 20
	content := os.Getenv("DAYTONA_BENCH_SYNC_CONTENT")
	if content == "" {
		content = "mixed"
	}
	env := benchEmulator(b, emulator.Options{})
	src := filepath.Join(b.TempDir(), "tree")
	makeBenchTree(b, src, files, size, content)
	_, size = treeSize(b, src)
	var t syncBenchTotals
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := startHost(b, hostOptions{args: workerProfileArgs(i), env: benchWorkerEnv()})
		l := h.acquire(leaseConfig(env, `,"timeoutMs":3600000,"reuseLease":true`))
		target := filepath.Join(l.remoteCwd, "tree")
		b.StartTimer()
		res, d, tr := benchSync(b, h, "environmentSyncIn", syncBenchParams(l, "directory", src, target))
		t.in, t.inTransfer = t.in+d, t.inTransfer+tr
		b.StopTimer()
		if n, bytes := treeSize(b, target); n != files || bytes != size || int(res["filesTransferred"].(float64)) != files {
			b.Fatalf("sandbox holds %d files, %d bytes; want %d, %d (%v)", n, bytes, files, size, res)
		}
		t.firstBytes += res["bytesTransferred"].(float64)
		res, d, _ = benchSync(b, h, "environmentSyncIn", syncBenchParams(l, "directory", src, target))
		t.again += d
		t.againBytes += res["bytesTransferred"].(float64)
		out := filepath.Join(b.TempDir(), "out")
		b.StartTimer()
		res, d, tr = benchSync(b, h, "environmentSyncOut", syncBenchParams(l, "directory", target, out))
		t.out, t.outTransfer = t.out+d, t.outTransfer+tr
		b.StopTimer()
		if n, bytes := treeSize(b, out); n != files || bytes != size {
			b.Fatalf("host holds %d files, %d bytes; want %d, %d (%v)", n, bytes, files, size, res)
		}
		if err := os.RemoveAll(out); err != nil {
			b.Fatal(err)
		}
		t.endRound(b, h, env, l, size)
		b.StartTimer()
	}
	b.StopTimer()
	t.report(b, size)
	b.ReportMetric(t.firstBytes/float64(size)/float64(b.N), "compressed/size")
}

// BenchmarkSyncFile syncs one large file in (full, then unchanged) and out.
func BenchmarkSyncFile(b *testing.B) {
	size := int64(benchEnvInt(b, "DAYTONA_BENCH_SYNC_MB", 1024)) << 20
	env := benchEmulator(b, emulator.Options{})
	src := filepath.Join(b.TempDir(), "big.bin")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	if err := fillContent(f, size, os.Getenv("DAYTONA_BENCH_SYNC_CONTENT") != "text", 7); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	var t syncBenchTotals
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := startHost(b, hostOptions{args: workerProfileArgs(i), env: benchWorkerEnv()})
		l := h.acquire(leaseConfig(env, `,"timeoutMs":3600000,"reuseLease":true`))
		target := filepath.Join(l.remoteCwd, "big.bin")
		b.StartTimer()
		_, d, tr := benchSync(b, h, "environmentSyncIn", syncBenchParams(l, "file", src, target))
		t.in, t.inTransfer = t.in+d, t.inTransfer+tr
		b.StopTimer()
		if fi, err := os.Stat(target); err != nil || fi.Size() != size {
			b.Fatalf("sandbox file: %v", err)
		}
		before := uploadedPaths(env, l.id)
		_, d, _ = benchSync(b, h, "environmentSyncIn", syncBenchParams(l, "file", src, target))
		t.again += d
		// A file mapping reports its size whether or not it was sent; what
		// was sent is what the sandbox received.
		t.againBytes += float64(int64(uploadedPaths(env, l.id)-before) * size)
		out := filepath.Join(b.TempDir(), "big.out")
		b.StartTimer()
		_, d, tr = benchSync(b, h, "environmentSyncOut", syncBenchParams(l, "file", target, out))
		t.out, t.outTransfer = t.out+d, t.outTransfer+tr
		b.StopTimer()
		if fi, err := os.Stat(out); err != nil || fi.Size() != size {
			b.Fatalf("host file: %v", err)
		}
		if err := os.Remove(out); err != nil {
			b.Fatal(err)
		}
		t.endRound(b, h, env, l, size)
		b.StartTimer()
	}
	b.StopTimer()
	t.report(b, size)
}

// uploadedPaths counts the files a sandbox received by bulk upload.
func uploadedPaths(env *emulatorEnv, sandboxID string) int {
	n := 0
	for _, c := range env.Server.Journal(sandboxID) {
		if c.Route == "bulk-upload" {
			n += len(c.Paths)
		}
	}
	return n
}

// repeatReader is an endless stream of one repeating 64 KiB block.
type repeatReader struct{}

var repeatBlock = func() []byte {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}()

func (repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], repeatBlock)
	}
	return n, nil
}

// BenchmarkSyncTreeAfterRestart syncs the tree into a reusable lease,
// shuts the worker down, starts a new one and syncs the unchanged tree
// again: what the second sync moves is counted on the wire, every toolbox
// request and response body between the new worker and the emulator
// (sent: uploads and commands; received: command output, the listing and
// manifest among it). Peak RSS is the higher of the two workers'.
func BenchmarkSyncTreeAfterRestart(b *testing.B) {
	files := benchEnvInt(b, "DAYTONA_BENCH_SYNC_FILES", 10_000)
	size := int64(benchEnvInt(b, "DAYTONA_BENCH_SYNC_MB", 1024)) << 20
	content := os.Getenv("DAYTONA_BENCH_SYNC_CONTENT")
	if content == "" {
		content = "mixed"
	}
	env, wire := countingEmulator(b)
	src := filepath.Join(b.TempDir(), "tree")
	makeBenchTree(b, src, files, size, content)
	_, size = treeSize(b, src)
	var sent, received, peak float64
	var again time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := startHost(b, hostOptions{args: workerProfileArgs(i), env: benchWorkerEnv()})
		l := h.acquire(leaseConfig(env, `,"timeoutMs":3600000,"reuseLease":true`))
		target := filepath.Join(l.remoteCwd, "tree")
		benchSync(b, h, "environmentSyncIn", syncBenchParams(l, "directory", src, target))
		hwm, _ := procMemory(b, h.w.Pid())
		peak = max(peak, hwm)
		h.shutdown()

		h = startHost(b, hostOptions{env: benchWorkerEnv()})
		wire.sent.Store(0)
		wire.received.Store(0)
		b.StartTimer()
		res, d, _ := benchSync(b, h, "environmentSyncIn", syncBenchParams(l, "directory", src, target))
		b.StopTimer()
		again += d
		sent += float64(wire.sent.Load())
		received += float64(wire.received.Load())
		if n, bytes := treeSize(b, target); n != files || bytes != size || int(res["filesTransferred"].(float64)) != files {
			b.Fatalf("sandbox holds %d files, %d bytes; want %d, %d (%v)", n, bytes, files, size, res)
		}
		hwm, _ = procMemory(b, h.w.Pid())
		peak = max(peak, hwm)
		h.destroy(l)
		h.shutdown()
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(again.Seconds()/n, "s-after-restart")
	b.ReportMetric(sent/n, "bytes-sent-after-restart")
	b.ReportMetric(received/n, "bytes-received-after-restart")
	b.ReportMetric(100*sent/n/float64(size), "%-sent-after-restart")
	b.ReportMetric(100*(sent+received)/n/float64(size), "%-moved-after-restart")
	b.ReportMetric(peak, "MiB-peak-rss")
}

// wireCounter counts the bodies of toolbox requests and responses.
type wireCounter struct {
	sent, received atomic.Int64
}

// countingEmulator is benchEmulator behind a handler that counts toolbox
// traffic (the sandboxes' toolbox URLs point back at the same server).
func countingEmulator(b *testing.B) (*emulatorEnv, *wireCounter) {
	b.Helper()
	root := b.TempDir()
	srv, err := emulator.New(emulator.Options{Root: root})
	if err != nil {
		b.Fatal(err)
	}
	wc := &wireCounter{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/toolbox/") {
			srv.ServeHTTP(w, r)
			return
		}
		r.Body = countingBody{r.Body, &wc.sent}
		srv.ServeHTTP(&countingResponse{ResponseWriter: w, n: &wc.received}, r)
	}))
	b.Cleanup(func() {
		if err := srv.Close(); err != nil {
			b.Error(err)
		}
		ts.Close()
	})
	env := &emulatorEnv{Env: &emulatortest.Env{Server: srv, HTTP: ts, APIURL: ts.URL + "/api", APIKey: emulator.DevAPIKey}, root: root}
	removeDuplexDiagnostics(b, env.Env)
	return env, wc
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

type countingResponse struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingResponse) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingResponse) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *countingResponse) Unwrap() http.ResponseWriter { return c.ResponseWriter }
