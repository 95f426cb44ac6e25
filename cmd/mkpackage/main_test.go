package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// testVersion is stamped into the packages built for these tests.
const testVersion = "1.2.3-test.1"

// built is the output of one Build for the host platform, shared by the
// tests (building a worker binary is the expensive part).
var built struct {
	dir  string
	host Platform
}

func TestMain(m *testing.M) {
	code, err := buildOnceAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func buildOnceAndRun(m *testing.M) (int, error) {
	host, err := SelectPlatforms("host")
	if err != nil {
		// No platform package for this machine: only the pure tests apply.
		fmt.Fprintf(os.Stderr, "mkpackage tests: %v; skipping the package tests\n", err)
		return m.Run(), nil
	}
	dir, err := os.MkdirTemp("", "mkpackage-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "npm")
	if err := Build(Options{
		Version: testVersion, Out: out, Platforms: host,
		Module: "github.com/paperclipai/daytona-worker/cmd/daytona-worker",
	}); err != nil {
		return 0, fmt.Errorf("building the host package: %w", err)
	}
	built.dir, built.host = out, host[0]
	return m.Run(), nil
}

func needBuilt(t *testing.T) {
	t.Helper()
	if built.dir == "" {
		t.Skipf("no platform package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
}

func mainDir() string { return filepath.Join(built.dir, dirName(PackageName)) }

func platformDir() string { return filepath.Join(built.dir, dirName(PlatformPackageName(built.host))) }
