package daytona_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// Benchmarks run the client against the emulator on loopback (client and
// emulator share the process, so memory figures bound both). Run with
//
//	go test -run '^$' -bench . -benchmem ./daytona/
//
// Each reports peakRSS-MiB (VmHWM, reset per benchmark where the kernel
// allows) and peakHeap-MiB (live heap objects, sampled).

// memProbe resets the RSS high-water mark and samples the heap until done.
type memProbe struct {
	stopHeap func() uint64
}

func startMemProbe() *memProbe {
	// Start from a collected heap, returned to the OS, so that garbage of the
	// setup (or of an earlier benchmark) is not counted.
	runtime.GC()
	debug.FreeOSMemory()
	// Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return &memProbe{stopHeap: heapPeak()}
}

func (m *memProbe) report(b *testing.B) {
	heap := m.stopHeap()
	b.ReportMetric(float64(heap)/(1<<20), "peakHeap-MiB")
	if kb, ok := vmHWM(); ok {
		b.ReportMetric(float64(kb)/1024, "peakRSS-MiB")
	}
}

// vmHWM reads the peak resident set size in KiB from /proc/self/status.
func vmHWM() (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// BenchmarkCreateExecDelete is a lease round trip: create a sandbox, run one
// command, delete it.
func BenchmarkCreateExecDelete(b *testing.B) {
	e := startEnv(b, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := b.Context()
	b.ReportAllocs()
	probe := startMemProbe()
	for b.Loop() {
		sb, err := e.c.CreateAndWait(ctx, daytona.CreateParams{Language: "python"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		res, err := e.c.Toolbox(sb).Execute(ctx, daytona.ExecuteRequest{Command: "echo ok"})
		if err != nil || strings.TrimSpace(res.Result) != "ok" {
			b.Fatal(res, err)
		}
		if _, err := e.c.Delete(ctx, sb.ID); err != nil {
			b.Fatal(err)
		}
	}
	probe.report(b)
}

// BenchmarkSessionLogStream replays a finished command's 15 MiB log over the
// follow WebSocket and demultiplexes it (MB/s = log bytes per second).
func BenchmarkSessionLogStream(b *testing.B) {
	e := startEnv(b, emulator.Options{StepDelay: emulator.Synchronous, LogFrameSize: 32 << 10})
	ctx := b.Context()
	_, tb := e.create(b, daytona.CreateParams{})
	if err := tb.CreateSession(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	// 15 MiB of 120-byte lines, half on each stream. Async, so that the
	// sync reply does not carry (and keep alive) the whole output.
	const lines = 1 << 17
	line := "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
	cmd := fmt.Sprintf(`(yes 'o%s' | head -n %d; yes 'e%s' | head -n %d >&2)`, line, lines/2, line, lines/2)
	r, err := tb.SessionExec(ctx, "bench", daytona.SessionExecRequest{Command: cmd, Async: true})
	if err != nil {
		b.Fatal(err)
	}
	cmdID := r.CmdID
	var so, se countWriter
	if _, err := tb.FollowSessionCommandLogs(ctx, "bench", cmdID, daytona.FollowOptions{Stdout: &so, Stderr: &se}); err != nil {
		b.Fatal(err)
	}
	if want := int64(lines * (len(line) + 2)); so.n+se.n != want {
		b.Fatalf("log has %d bytes, want %d", so.n+se.n, want)
	}
	b.SetBytes(so.n + se.n)
	b.ReportAllocs()
	probe := startMemProbe()
	for b.Loop() {
		so, se = countWriter{}, countWriter{}
		if _, err := tb.FollowSessionCommandLogs(ctx, "bench", cmdID, daytona.FollowOptions{Stdout: &so, Stderr: &se}); err != nil {
			b.Fatal(err)
		}
	}
	probe.report(b)
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

const transferSize = 64 << 20

// BenchmarkUpload streams 64 MiB from a generating reader with bulk-upload.
func BenchmarkUpload(b *testing.B) {
	e := startEnv(b, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := b.Context()
	_, tb := e.create(b, daytona.CreateParams{})
	b.SetBytes(transferSize)
	b.ReportAllocs()
	probe := startMemProbe()
	for b.Loop() {
		if _, err := tb.UploadFiles(ctx, []daytona.Upload{{Path: "big.bin", Reader: daytona.NewPatternReader(transferSize)}}); err != nil {
			b.Fatal(err)
		}
	}
	probe.report(b)
}

// BenchmarkDownload streams 64 MiB into a hashing writer with bulk-download.
func BenchmarkDownload(b *testing.B) {
	e := startEnv(b, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := b.Context()
	_, tb := e.create(b, daytona.CreateParams{})
	if _, err := tb.UploadFiles(ctx, []daytona.Upload{{Path: "big.bin", Reader: daytona.NewPatternReader(transferSize)}}); err != nil {
		b.Fatal(err)
	}
	want := daytona.PatternHash(transferSize)
	b.SetBytes(transferSize)
	b.ReportAllocs()
	probe := startMemProbe()
	for b.Loop() {
		h := sha256.New()
		res, err := tb.DownloadFiles(ctx, []daytona.Download{{Path: "big.bin", Writer: h}})
		if err != nil || res[0].Err != nil {
			b.Fatal(err, res[0].Err)
		}
		if !bytes.Equal(h.Sum(nil), want) {
			b.Fatal("content differs")
		}
	}
	probe.report(b)
}

// BenchmarkDownloadDiscard is BenchmarkDownload without hashing, to show the
// transport's own cost.
func BenchmarkDownloadDiscard(b *testing.B) {
	e := startEnv(b, emulator.Options{StepDelay: emulator.Synchronous})
	ctx := b.Context()
	_, tb := e.create(b, daytona.CreateParams{})
	if _, err := tb.UploadFiles(ctx, []daytona.Upload{{Path: "big.bin", Reader: daytona.NewPatternReader(transferSize)}}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(transferSize)
	b.ReportAllocs()
	probe := startMemProbe()
	for b.Loop() {
		if _, err := tb.DownloadFile(ctx, "big.bin", io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	probe.report(b)
}
