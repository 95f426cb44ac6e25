package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkEntryColdStart measures what the npm entry script adds to a
// worker start: spawn → initialize reply for the platform binary run
// directly, then through `node dist/worker.js` under each Node of nodes()
// (ENTRY_TEST_NODE adds a second one, e.g. Node 24 whose entry execs the
// binary), alternating so that a busy machine slows all sides alike. It
// reports medians, and the resident memory of the Node process that stays
// alive beside the binary when Node cannot exec it.
func BenchmarkEntryColdStart(b *testing.B) {
	if built.dir == "" {
		b.Skip("no platform package for this machine")
	}
	root := filepath.Join(b.TempDir(), "node_modules", "@tickernelz")
	copyTree(b, mainDir(), filepath.Join(root, dirName(PackageName)))
	copyTree(b, platformDir(), filepath.Join(root, dirName(PlatformPackageName(built.host))))
	entry := filepath.Join(root, dirName(PackageName), "dist", "worker.js")
	binary := filepath.Join(root, dirName(PlatformPackageName(built.host)), "bin", "daytona-worker")

	type side struct {
		name  string
		argv  []string
		times []time.Duration
		rss   []float64
	}
	sides := []*side{{name: "binary", argv: []string{binary}}}
	nodePaths := []string{"node"}
	if extra := os.Getenv("ENTRY_TEST_NODE"); extra != "" {
		nodePaths = append(nodePaths, extra)
	}
	for _, n := range nodePaths {
		out, err := exec.Command(n, "-p", "(typeof process.execve === 'function' ? 'execve' : 'spawn') + '-' + process.version").Output()
		if err != nil {
			b.Skipf("%s: %v", n, err)
		}
		sides = append(sides, &side{name: "entry-" + strings.TrimSpace(string(out)), argv: []string{n, entry}})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range sides {
			took, rss := startToInitialize(b, s.argv)
			s.times = append(s.times, took)
			s.rss = append(s.rss, rss)
		}
	}
	b.StopTimer()
	for _, s := range sides {
		slices.Sort(s.times)
		slices.Sort(s.rss)
		b.ReportMetric(float64(s.times[len(s.times)/2].Microseconds())/1000, s.name+"-ms")
		b.ReportMetric(s.rss[len(s.rss)/2], s.name+"-rss-MiB")
	}
}

// startToInitialize starts argv, sends initialize and times the reply; rss
// is the started process's resident memory right then (Linux; 0 elsewhere).
func startToInitialize(b *testing.B, argv []string) (time.Duration, float64) {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TZ=UTC"}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.WriteString(stdin, initializeLine+"\n"); err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() && !strings.Contains(lines.Text(), `"id":1`) {
	}
	took := time.Since(begin)
	rss := 0.0
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				rss = kb / 1024
			}
		}
	}
	_ = stdin.Close()
	_ = cmd.Wait()
	return took, rss
}
