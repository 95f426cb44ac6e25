package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/internal/workerhost"
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

// startWorker starts the binary with a minimal environment, as the host's
// worker manager does; the test's end kills it if it still runs.
func startWorker(t testing.TB, env []string, args ...string) *workerhost.Process {
	t.Helper()
	return startWorkerBinary(t, workerBin, env, args...)
}

// startWorkerBinary is startWorker with another build of the worker.
func startWorkerBinary(t testing.TB, bin string, env []string, args ...string) *workerhost.Process {
	t.Helper()
	p, err := workerhost.Start(context.Background(), workerhost.Command{Path: bin, Args: args, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Close()
		if t.Failed() {
			t.Logf("worker stderr:\n%s", p.Stderr())
		}
	})
	return p
}

// waitExit waits for the worker to exit and returns its exit code.
func waitExit(t testing.TB, p *workerhost.Process) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// playTranscript replays a transcript file against a fresh worker and, with
// -update, rewrites its expectations.
func playTranscript(t *testing.T, path string, vars scenario.Vars, env []string, args ...string) {
	t.Helper()
	playTranscriptWithHooks(t, path, vars, nil, env, args...)
}

// playTranscriptWithHooks is playTranscript with "hook NAME" steps.
func playTranscriptWithHooks(t *testing.T, path string, vars scenario.Vars, hooks map[string]func(scenario.Vars) error, env []string, args ...string) {
	t.Helper()
	steps, err := scenario.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := startWorker(t, env, args...)
	player := &scenario.Player{Worker: p, Vars: vars, Update: *update, Hooks: hooks}
	out, err := player.Play(steps)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if *update {
		if err := scenario.WriteFile(path, out); err != nil {
			t.Fatal(err)
		}
	}
}
