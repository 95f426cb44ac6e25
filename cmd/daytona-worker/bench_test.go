package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/internal/procstat"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
)

const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"manifest":{},"config":{},"instanceInfo":{"instanceId":"bench","hostVersion":"1"},"apiVersion":1}}` + "\n"

// benchProc is a worker read with as little host machinery as there can
// be: lines scanned from its output as they are.
type benchProc struct {
	*workerhost.Process
	out *bufio.Reader
}

func startBenchWorker(b *testing.B) *benchProc {
	b.Helper()
	p := startWorker(b, nil)
	return &benchProc{Process: p, out: bufio.NewReaderSize(p.Stdout(), 1<<20)}
}

func (p *benchProc) initialize(b *testing.B) {
	b.Helper()
	if _, err := io.WriteString(p, initializeLine); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the ready log, then the reply
		if _, err := p.out.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

func (p *benchProc) stop() {
	_ = p.CloseStdin()
	_, _ = p.Wait(context.Background())
}

// BenchmarkColdStart measures process start to the initialize reply.
func BenchmarkColdStart(b *testing.B) {
	durations := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		start := time.Now()
		p := startBenchWorker(b)
		p.initialize(b)
		durations = append(durations, time.Since(start))
		b.StopTimer()
		p.stop()
		b.StartTimer()
	}
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "ms-p99")
}

// BenchmarkIdleRSS reports the resident memory of an initialized, idle worker.
func BenchmarkIdleRSS(b *testing.B) {
	var peak, rss float64
	for i := 0; i < b.N; i++ {
		p := startBenchWorker(b)
		p.initialize(b)
		io.WriteString(p, `{"jsonrpc":"2.0","id":2,"method":"health"}`+"\n")
		p.out.ReadString('\n')
		time.Sleep(50 * time.Millisecond)
		hwm, cur := procMemory(b, p.Pid())
		peak, rss = max(peak, hwm), max(rss, cur)
		p.stop()
	}
	b.ReportMetric(peak, "MiB-peak-rss")
	b.ReportMetric(rss, "MiB-rss")
}

// BenchmarkHealthRoundTrips pipelines health requests through one worker.
func BenchmarkHealthRoundTrips(b *testing.B) {
	p := startBenchWorker(b)
	defer p.stop()
	p.initialize(b)
	b.ResetTimer()
	start := time.Now()
	go func() {
		w := bufio.NewWriterSize(p, 1<<16)
		for i := 0; i < b.N; i++ {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"health","params":{}}`+"\n", i+10)
		}
		w.Flush()
	}()
	for i := 0; i < b.N; i++ {
		if _, err := p.out.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "roundtrips/s")
	hwm, _ := procMemory(b, p.Pid())
	b.ReportMetric(hwm, "MiB-peak-rss")
}

// BenchmarkHealthLatency sends one request at a time.
func BenchmarkHealthLatency(b *testing.B) {
	p := startBenchWorker(b)
	defer p.stop()
	p.initialize(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		io.WriteString(p, `{"jsonrpc":"2.0","id":5,"method":"health","params":{}}`+"\n")
		if _, err := p.out.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// procMemory returns VmHWM and VmRSS of pid in MiB.
func procMemory(b *testing.B, pid int) (hwm, rss float64) {
	b.Helper()
	hwm, rss, err := procstat.Memory(pid)
	if err != nil {
		b.Skip("no /proc on this system")
	}
	return hwm, rss
}
