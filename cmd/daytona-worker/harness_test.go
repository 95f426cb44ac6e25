package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/internal/transcript"
)

var update = flag.Bool("update", false, "rewrite transcript expectations from what the worker writes")

// workerBin is the daytona-worker binary built once for these tests, or the
// one DAYTONA_BENCH_WORKER_BIN names (benchmarks alternating two builds).
var workerBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if bin := os.Getenv("DAYTONA_BENCH_WORKER_BIN"); bin != "" {
		// A benchmark comparing two builds runs each in turn on this one.
		workerBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "daytona-worker-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, "daytona-worker")
	args := []string{"build", "-o", workerBin}
	if raceEnabled {
		// The binary under test gets the race detector too.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building daytona-worker:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// The harness's own goroutines (readers of the workers' output, the
		// transcript player's, the emulators') must all have ended.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// workerProc is one running daytona-worker.
type workerProc struct {
	*transcript.ExecProcess
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *syncBuffer
}

// startWorker starts the binary with a minimal environment, as the host's
// worker manager does.
func startWorker(t testing.TB, env []string, args ...string) *workerProc {
	t.Helper()
	return startWorkerBinary(t, workerBin, env, args...)
}

// startWorkerBinary is startWorker with another build of the worker.
func startWorkerBinary(t testing.TB, bin string, env []string, args ...string) *workerProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TZ=UTC"}, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &workerProc{ExecProcess: &transcript.ExecProcess{Cmd: cmd}, cmd: cmd, stdin: stdin, stdout: stdout, stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_, _ = p.Wait()
		if t.Failed() {
			t.Logf("worker stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// playTranscript replays a transcript file against a fresh worker and, with
// -update, rewrites its expectations.
func playTranscript(t *testing.T, path string, vars transcript.Vars, env []string, args ...string) {
	t.Helper()
	playTranscriptWithHooks(t, path, vars, nil, env, args...)
}

// playTranscriptWithHooks is playTranscript with {"hook": …} steps.
func playTranscriptWithHooks(t *testing.T, path string, vars transcript.Vars, hooks map[string]func(transcript.Vars) error, env []string, args ...string) {
	t.Helper()
	steps, err := transcript.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := startWorker(t, env, args...)
	player := &transcript.Player{Stdin: p.stdin, Stdout: p.stdout, Process: p, Vars: vars, Update: *update, Hooks: hooks}
	out, err := player.Play(steps)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if *update {
		if err := transcript.WriteFile(path, out); err != nil {
			t.Fatal(err)
		}
	}
}
