package emulator_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// BenchmarkExecute is one /process/execute round trip: HTTP, a fresh shell
// process, its output.
func BenchmarkExecute(b *testing.B) {
	_, c := start(b, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	b.ResetTimer()
	for b.Loop() {
		if code, out := c.execute(id, "echo hi"); code != 0 || out != "hi\n" {
			b.Fatalf("execute: %d %q", code, out)
		}
	}
}

// BenchmarkSessionExec is one synchronous command in a persistent session
// shell: FIFOs, labelled log, exit-code report.
func BenchmarkSessionExec(b *testing.B) {
	_, c := start(b, emulator.Options{StepDelay: emulator.Synchronous})
	id := c.create(nil)["id"].(string)
	if r := c.tb(id, "POST", "/process/session", map[string]any{"sessionId": "s"}); r.status != http.StatusCreated {
		b.Fatalf("create session: %d", r.status)
	}
	b.ResetTimer()
	for b.Loop() {
		if status, out := c.sessionExec(id, "s", "echo hi", false); status != 200 || *out.Stdout != "hi\n" {
			b.Fatalf("exec: %d", status)
		}
	}
}

// BenchmarkCreateDelete is a create and a delete with synchronous steps
// (folders made and removed, no processes).
func BenchmarkCreateDelete(b *testing.B) {
	_, c := start(b, emulator.Options{StepDelay: emulator.Synchronous})
	for b.Loop() {
		r := c.api("POST", "/sandbox", map[string]any{})
		if r.status != 200 {
			b.Fatalf("create: %d", r.status)
		}
		if d := c.api("DELETE", "/sandbox/"+r.obj(b)["id"].(string), nil); d.status != 200 {
			b.Fatalf("delete: %d", d.status)
		}
	}
}

// BenchmarkStartClose is what a test pays for an emulator of its own, as
// emulatortest.Start gives it: the server and its root, an HTTP listener,
// one request answered, then Close and the listener's close. cpu-ns/op is
// the process's CPU time (user and system), what a CPU-bound suite pays.
func BenchmarkStartClose(b *testing.B) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportAllocs()
	before := cpu()
	for b.Loop() {
		srv, err := emulator.New(emulator.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		res, err := ts.Client().Get(ts.URL + "/api/config")
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("config: %d", res.StatusCode)
		}
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
		ts.Close()
	}
	b.ReportMetric(float64(cpu()-before)/float64(b.N), "cpu-ns/op")
}
