package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
)

// install lays the built packages out as npm installs them (copies, not
// links: Node resolves a module from its real path) and returns the entry
// script's path. withPlatform false leaves the platform package out.
func install(t *testing.T, withPlatform bool) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "node_modules", "@tickernelz")
	copyTree(t, mainDir(), filepath.Join(root, dirName(PackageName)))
	if withPlatform {
		copyTree(t, platformDir(), filepath.Join(root, dirName(PlatformPackageName(built.host))))
	}
	return filepath.Join(root, dirName(PackageName), "dist", "worker.js")
}

func copyTree(t testing.TB, from, to string) {
	t.Helper()
	require.NoError(t, filepath.Walk(from, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, info.Mode().Perm())
	}))
}

// script writes an executable shell script standing in for the binary.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-worker")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return path
}

// entryProc is the entry script running under Node, as the host forks it.
type entryProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *lockedBuffer
	// exited is closed once the one call of cmd.Wait returns (with waitErr):
	// a test that gave up waiting and its cleanup must not call it twice.
	waitOnce sync.Once
	exited   chan struct{}
	waitErr  error
}

// startWait calls cmd.Wait once, in the background, and returns the
// channel closed when it returns.
func (p *entryProc) startWait() <-chan struct{} {
	p.waitOnce.Do(func() {
		p.exited = make(chan struct{})
		go func() {
			p.waitErr = p.cmd.Wait()
			close(p.exited)
		}()
	})
	return p.exited
}

// processTree describes the entry process and its children, for a test
// that timed out waiting for them.
func (p *entryProc) processTree() string {
	var b strings.Builder
	var walk func(pid int, depth int)
	walk = func(pid int, depth int) {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		state := "gone"
		if err == nil {
			for _, line := range strings.Split(string(status), "\n") {
				if strings.HasPrefix(line, "Name:") || strings.HasPrefix(line, "State:") || strings.HasPrefix(line, "SigCgt:") {
					state += " " + strings.Join(strings.Fields(line), " ")
				}
			}
			state = strings.TrimPrefix(state, "gone ")
		}
		fmt.Fprintf(&b, "%s%d: %s\n", strings.Repeat("  ", depth), pid, state)
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		for _, c := range strings.Fields(string(children)) {
			if n, err := strconv.Atoi(c); err == nil && depth < 3 {
				walk(n, depth+1)
			}
		}
	}
	walk(p.cmd.Process.Pid, 0)
	return b.String()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startEntry(t *testing.T, node nodeBinary, entry string, env []string, nodeArgs ...string) *entryProc {
	t.Helper()
	cmd := exec.Command(node.path, append(nodeArgs, entry)...)
	// The host passes a minimal environment; so do we.
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TZ=UTC", "NODE_ENV=production"}, env...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &entryProc{cmd: cmd, stdin: stdin, stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	p.lines = bufio.NewScanner(stdout)
	p.lines.Buffer(make([]byte, 1<<20), 1<<20)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.startWait():
		case <-time.After(10 * time.Second):
		}
		if t.Failed() {
			t.Logf("entry stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *entryProc) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(p.stdin, line+"\n")
	require.NoError(t, err)
}

// reply reads lines until the reply with the given id.
func (p *entryProc) reply(t *testing.T, id int) map[string]json.RawMessage {
	t.Helper()
	for p.lines.Scan() {
		var msg map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(p.lines.Bytes(), &msg), "stdout carries protocol lines only: %q", p.lines.Text())
		if string(msg["id"]) == jsonInt(id) {
			return msg
		}
	}
	t.Fatalf("no reply %d (stdout closed: %v)", id, p.lines.Err())
	return nil
}

func jsonInt(i int) string { b, _ := json.Marshal(i); return string(b) }

// wait waits for the entry process to end, within a generous bound.
func (p *entryProc) wait(t *testing.T) *os.ProcessState {
	t.Helper()
	select {
	case <-p.startWait():
		var exit *exec.ExitError
		if p.waitErr != nil && !errors.As(p.waitErr, &exit) {
			t.Fatal(p.waitErr)
		}
		return p.cmd.ProcessState
	case <-time.After(60 * time.Second):
		t.Fatalf("the entry script did not exit; its processes:\n%s", p.processTree())
		return nil
	}
}

// nodeBinary is a Node the entry script is tested under. With execve (Node
// 22.15, 23.11 and later) the binary replaces the entry process; without, the
// entry runs it as a child.
type nodeBinary struct {
	path   string
	execve bool
}

// nodes are the Nodes to test under: node from PATH and, when set,
// ENTRY_TEST_NODE (for example a Node 24, whose execve path Paperclip hosts take).
func nodes(t *testing.T) []nodeBinary {
	t.Helper()
	paths := []string{needNode(t)}
	if extra := os.Getenv("ENTRY_TEST_NODE"); extra != "" {
		paths = append(paths, extra)
	}
	var out []nodeBinary
	for _, p := range paths {
		res, err := exec.Command(p, "-p", "typeof process.execve").Output()
		require.NoError(t, err, "%s", p)
		out = append(out, nodeBinary{path: p, execve: strings.TrimSpace(string(res)) == "function"})
	}
	return out
}

// eachNode runs f as a subtest under every Node of nodes.
func eachNode(t *testing.T, f func(t *testing.T, node nodeBinary)) {
	t.Helper()
	for _, node := range nodes(t) {
		name := "spawn"
		if node.execve {
			name = "execve"
		}
		t.Run(name+"/"+filepath.Base(filepath.Dir(filepath.Dir(node.path))), func(t *testing.T) {
			t.Parallel()
			f(t, node)
		})
	}
}

const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"manifest":{},"config":{},"instanceInfo":{"instanceId":"i","hostVersion":"1.0.0"},"apiVersion":1}}`

// The host's lines reach the binary and its lines come back, untouched.
func TestEntryRunsThePlatformBinaryOnTheSameStdio(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		p := startEntry(t, node, install(t, true), nil)
		p.send(t, initializeLine)
		var init protocol.InitializeResult
		require.NoError(t, json.Unmarshal(p.reply(t, 1)["result"], &init))
		assert.True(t, init.OK)
		assert.Equal(t, protocol.SupportedMethods(), init.SupportedMethods)
		assertProcessShape(t, node, p.cmd.Process.Pid)
		p.send(t, `{"jsonrpc":"2.0","id":2,"method":"health","params":{}}`)
		assert.JSONEq(t, `{"status":"ok","message":"Daytona sandbox provider plugin healthy"}`, string(p.reply(t, 2)["result"]))
		p.send(t, `{"jsonrpc":"2.0","id":3,"method":"shutdown","params":{}}`)
		assert.Equal(t, "null", string(p.reply(t, 3)["result"]))
		assert.Equal(t, 0, p.wait(t).ExitCode())
	})
}

// assertProcessShape checks, where /proc tells, that with execve the forked
// process has become the binary, and that without it the binary is its child.
func assertProcessShape(t *testing.T, node nodeBinary, pid int) {
	t.Helper()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return // not Linux
	}
	if node.execve {
		assert.Equal(t, "daytona-worker\n", string(comm), "execve: the forked pid is the binary")
		return
	}
	assert.Contains(t, string(comm), "node")
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err == nil {
		assert.Len(t, strings.Fields(string(children)), 1, "spawn: the binary is the entry's one child")
	}
}

// SIGTERM and SIGINT sent to the forked process reach the binary, which stops
// as it does on a signal, and the process exits with its code.
func TestEntryForwardsTermAndInt(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			t.Run(sig.String(), func(t *testing.T) {
				t.Parallel()
				p := startEntry(t, node, install(t, true), nil)
				p.send(t, initializeLine)
				p.reply(t, 1) // the binary is up and serving
				require.NoError(t, p.cmd.Process.Signal(sig))
				state := p.wait(t)
				assert.Equal(t, 0, state.ExitCode(), "the worker stops cleanly on %v and the entry exits with its code", sig)
				assert.Contains(t, p.stderr.String(), "stopping on signal", "the binary itself received the signal")
			})
		}
	})
}

// A signal that reaches the entry the moment its child exists (the binary
// may already have answered the host) is passed on, not the entry's death
// with the binary left running. A preload holds the entry inside spawn
// until the child is ready, then signals the entry, so the signal lands
// between the spawn and the statement after it every time. Before the fix
// the listeners came after the spawn: Node died of the SIGTERM and the
// child ran on (TestEntryForwardsTermAndInt timed out so once under load).
func TestEntryForwardsASignalThatFollowsTheSpawn(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		if node.execve {
			t.Skip("the binary replaces the entry: there is no child")
		}
		dir := t.TempDir()
		ready := filepath.Join(dir, "ready")
		// The fake binary catches TERM, says it is ready, and gives up
		// after 5 s, so that a regression fails instead of hanging.
		fake := script(t, `trap 'echo "child got TERM" >&2; exit 0' TERM
: > "$READY"
i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; exit 3`)
		preload := filepath.Join(dir, "signal-after-spawn.mjs")
		require.NoError(t, os.WriteFile(preload, []byte(`import cp from "node:child_process";
import { existsSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
const spawn = cp.spawn;
cp.spawn = (...args) => {
  const child = spawn(...args);
  const until = Date.now() + 10000;
  while (!existsSync(process.env.READY) && Date.now() < until) {}
  process.kill(process.pid, "SIGTERM");
  return child;
};
syncBuiltinESMExports();
`), 0o644))
		p := startEntry(t, node, install(t, true),
			[]string{"DAYTONA_WORKER_BINARY=" + fake, "READY=" + ready}, "--import", "file://"+preload)
		state := p.wait(t)
		assert.Equal(t, 0, state.ExitCode(), "the entry ends as its child did: %v", state)
		assert.Contains(t, p.stderr.String(), "child got TERM")
	})
}

func TestEntryExitsWithTheBinarysCode(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		p := startEntry(t, node, install(t, true), []string{"DAYTONA_WORKER_BINARY=" + script(t, "exit 7")})
		assert.Equal(t, 7, p.wait(t).ExitCode())
	})
}

// A binary killed by a signal makes the forked process die of the same
// signal, so the host's exit handler sees what really happened.
func TestEntryDiesOfTheBinarysSignal(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		for name, sig := range map[string]syscall.Signal{"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p := startEntry(t, node, install(t, true), []string{"DAYTONA_WORKER_BINARY=" + script(t, "kill -"+name+" $$")})
				state := p.wait(t)
				status, ok := state.Sys().(syscall.WaitStatus)
				require.True(t, ok)
				require.True(t, status.Signaled(), "exit status %v", state)
				assert.Equal(t, sig, status.Signal())
			})
		}
	})
}

// DAYTONA_WORKER_BINARY replaces the platform package's binary, with the
// arguments passed on; no platform package is needed then.
func TestEntryBinaryOverride(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		fake := script(t, `echo "fake worker: $*"`)
		cmd := exec.Command(node.path, install(t, false), "--log-level", "debug")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DAYTONA_WORKER_BINARY=" + fake}
		out, err := cmd.Output()
		require.NoError(t, err)
		assert.Equal(t, "fake worker: --log-level debug\n", string(out))
	})
}

func TestEntryNamesTheMissingPlatformPackage(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		p := startEntry(t, node, install(t, false), nil)
		assert.Equal(t, 1, p.wait(t).ExitCode())
		assert.Contains(t, p.stderr.String(),
			"the platform package "+PlatformPackageName(built.host)+"@"+testVersion+" is not installed")
		assert.Contains(t, p.stderr.String(), "--omit=optional")
	})
}

func TestEntryNamesAnUnsupportedPlatform(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		preload := filepath.Join(t.TempDir(), "arch.mjs")
		require.NoError(t, os.WriteFile(preload, []byte(`Object.defineProperty(process, "arch", { value: "riscv64" });`+"\n"), 0o644))
		p := startEntry(t, node, install(t, true), nil, "--import", "file://"+preload)
		assert.Equal(t, 1, p.wait(t).ExitCode())
		stderr := p.stderr.String()
		assert.Contains(t, stderr, "no daytona-worker binary is published for "+built.host.NodeOS+"-riscv64")
		assert.Contains(t, stderr, "DAYTONA_WORKER_BINARY")
		for _, pl := range Platforms() {
			assert.Contains(t, stderr, pl.Name())
		}
	})
}

func TestEntryReportsABinaryThatCannotRun(t *testing.T) {
	needBuilt(t)
	eachNode(t, func(t *testing.T, node nodeBinary) {
		missing := filepath.Join(t.TempDir(), "nope")
		p := startEntry(t, node, install(t, false), []string{"DAYTONA_WORKER_BINARY=" + missing})
		assert.Equal(t, 1, p.wait(t).ExitCode())
		assert.Contains(t, p.stderr.String(), "cannot run "+missing)
	})
}
