package main

// End-to-end tests of environmentSyncIn/Out: the real worker binary, a host
// that speaks the protocol, and the emulator running every sandbox command
// for real. Each case of the plugin's own file-sync tests
// (reference/spec/file-sync-tests.md, numbered §13.n.k below) is replayed
// here and then checked on both sides: the files in the sandbox and on the
// host, and the requests the sandbox received (the emulator's journal).

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/internal/scenario"
	"github.com/paperclipai/daytona-worker/internal/testutil"
)

const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

// syncRig is one worker with one lease on a fresh emulator.
type syncRig struct {
	t      *testing.T
	env    *emulatorEnv
	h      *host
	l      lease
	meta   map[string]any // the lease metadata acquire returned
	remote string         // the lease's workspace; the emulator's sandboxes are folders on this machine
	dir    string         // a host folder for sources and targets
}

func newSyncRig(t *testing.T, cfgExtra string) *syncRig {
	t.Helper()
	env := startEmulator(t, emulator.Options{StepDelay: emulator.Synchronous})
	h := startHost(t, hostOptions{})
	cfg := leaseConfig(env, cfgExtra)
	p := baseParams(cfg)
	p["runId"], p["agentId"], p["executionWorkspaceId"], p["adapterType"] = "run-1", "ag-1", "ws-1", "claude_local"
	rep := h.call("environmentAcquireLease", p, "").wait()
	require.Nil(t, rep.Error, "acquire: %v", rep.Error)
	res := plain(rep.Result).(map[string]any)
	meta := res["metadata"].(map[string]any)
	l := lease{id: res["providerLeaseId"].(string), remoteCwd: meta["remoteCwd"].(string), cfg: cfg}
	env.Server.ResetJournal(l.id)
	return &syncRig{t: t, env: env, h: h, l: l, meta: meta, remote: l.remoteCwd, dir: t.TempDir()}
}

func (r *syncRig) done() { finish(r.t, r.h, r.env, r.l) }

// op is one sync operation on the wire.
func op(id string, files []map[string]any, post ...map[string]any) map[string]any {
	o := map[string]any{"operationId": id, "files": files}
	if post != nil {
		o["postUploadCommands"] = post
	}
	return o
}

// mapping is one file mapping; extra sets mode, exclude, access, …
func mapping(src, dst, kind string, extra ...any) map[string]any {
	m := map[string]any{"sourcePath": src, "targetPath": dst, "kind": kind}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func (r *syncRig) params(ops ...map[string]any) map[string]any {
	p := baseParams(r.l.cfg)
	p["lease"] = map[string]any{"providerLeaseId": r.l.id, "metadata": map[string]any{"provider": "daytona", "remoteCwd": r.remote}, "expiresAt": nil}
	p["operations"] = ops
	return p
}

// start sends a traced sync call and returns it in flight with its
// invocation id.
func (r *syncRig) start(method string, ops ...map[string]any) (*pending, string) {
	inv := newInvocation()
	return r.h.send(request{method: method, params: r.params(ops...), invocation: inv, traceparent: traceparent})[0], inv
}

func (r *syncRig) in(ops ...map[string]any) (reply, string) {
	p, inv := r.start("environmentSyncIn", ops...)
	return p.wait(), inv
}

func (r *syncRig) out(ops ...map[string]any) (reply, string) {
	p, inv := r.start("environmentSyncOut", ops...)
	return p.wait(), inv
}

// ok requires a successful reply and returns its operations.
func (r *syncRig) ok(rep reply) []any {
	r.t.Helper()
	require.Nil(r.t, rep.Error, "sync failed: %v", rep.Error)
	return plain(rep.Result).(map[string]any)["operations"].([]any)
}

// plain turns the host's json.Numbers into float64s.
func plain(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// failed requires an error reply and returns its message.
func (r *syncRig) failed(rep reply) string {
	r.t.Helper()
	require.NotNil(r.t, rep.Error, "sync succeeded: %v", rep.Result)
	return rep.Error["message"].(string)
}

func opResult(id string, files, bytes int) map[string]any {
	return map[string]any{"operationId": id, "filesTransferred": float64(files), "bytesTransferred": float64(bytes)}
}

// host files

func (r *syncRig) write(rel, content string, mode os.FileMode) string {
	r.t.Helper()
	p := filepath.Join(r.dir, rel)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(r.t, os.WriteFile(p, []byte(content), mode))
	require.NoError(r.t, os.Chmod(p, mode))
	return p
}

func (r *syncRig) hostPath(rel string) string { return filepath.Join(r.dir, rel) }

// sandbox files (the workspace is a folder on this machine)

func (r *syncRig) rpath(rel string) string { return filepath.Join(r.remote, rel) }

func (r *syncRig) sandboxWrite(rel, content string, mode os.FileMode) string {
	r.t.Helper()
	p := r.rpath(rel)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(r.t, os.WriteFile(p, []byte(content), mode))
	require.NoError(r.t, os.Chmod(p, mode))
	return p
}

func assertFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if !assert.NoError(t, err) {
		return
	}
	assert.True(t, fi.Mode().IsRegular(), "%s is a regular file", path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, content, string(b), path)
	if mode != 0 {
		assert.Equal(t, mode, fi.Mode().Perm(), "mode of %s", path)
	}
}

func assertLink(t *testing.T, path, target string) {
	t.Helper()
	got, err := os.Readlink(path)
	if assert.NoError(t, err, "%s is a symlink", path) {
		assert.Equal(t, target, got)
	}
}

func assertMissing(t *testing.T, path string) {
	t.Helper()
	_, err := os.Lstat(path)
	assert.True(t, os.IsNotExist(err), "%s must not exist", path)
}

// scratch lists reserved names left in a folder.
func scratch(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".paperclip-upload*"))
	require.NoError(t, err)
	return m
}

// the sandbox's requests

// promotes counts the moves of a promote script into the workspace (not
// those that complete a manifest outside it).
func promotes(script, remote string) int {
	return len(regexp.MustCompile(`mv -f [^/]*`+regexp.QuoteMeta(remote)).FindAllString(script, -1))
}

func (r *syncRig) journal() []emulator.ToolboxCall { return r.env.Server.Journal(r.l.id) }

// calls are the requests of one route; an upload's paths leave out the
// manifests incremental sync keeps outside the workspace (see
// TestSyncInManifestStaysOutOfTheWorkspace), which the plugin has none of.
func (r *syncRig) calls(route string) []emulator.ToolboxCall {
	var out []emulator.ToolboxCall
	for _, c := range r.journal() {
		if c.Route == route {
			var paths []string
			for _, p := range c.Paths {
				if !strings.Contains(p, "/.cache/paperclip-daytona-sync/") {
					paths = append(paths, p)
				}
			}
			c.Paths = paths
			out = append(out, c)
		}
	}
	return out
}

func (r *syncRig) executes(containing string) []emulator.ToolboxCall {
	var out []emulator.ToolboxCall
	for _, c := range r.calls("execute") {
		if strings.Contains(c.Command, containing) {
			out = append(out, c)
		}
	}
	return out
}

// index of the first journal call matching; -1 if none.
func (r *syncRig) index(match func(emulator.ToolboxCall) bool) int {
	for i, c := range r.journal() {
		if match(c) {
			return i
		}
	}
	return -1
}

// spans waits for n span.record calls of an invocation (they are sent in
// the background) and returns them.
func (r *syncRig) spans(inv string, n int) []map[string]any {
	r.t.Helper()
	var got []map[string]any
	ok := testutil.Eventually(30*time.Second, func() bool { got = r.h.recordedSpans(inv); return len(got) >= n })
	require.True(r.t, ok, "want %d spans, got %v", n, got)
	out := make([]map[string]any, len(got))
	for i, s := range got {
		out[i] = plain(s).(map[string]any)
	}
	return out
}

func spanNames(spans []map[string]any) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s["name"].(string))
	}
	return out
}

func spanNamed(spans []map[string]any, name string) map[string]any {
	for _, s := range spans {
		if s["name"] == name {
			return s
		}
	}
	return nil
}

func attr(s map[string]any, key string) any {
	return s["attributes"].(map[string]any)["paperclip.sandbox.startup."+key]
}

var scratchBase = regexp.MustCompile(`^\.paperclip-upload-`)

// ---- §13.1 declaration and the advisory writable set ----

// §13.1.1: both methods are advertised and served (not -32004).
func TestSyncMethodsAreServed(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	rep, _ := r.in(op("noop", []map[string]any{}))
	assert.Equal(t, []any{opResult("noop", 0, 0)}, r.ok(rep))
	rep, _ = r.out(op("noop", []map[string]any{}))
	assert.Equal(t, []any{opResult("noop", 0, 0)}, r.ok(rep))
	r.done()
}

// ---- §13.2 sync in: file mappings ----

// §13.2.5: one upload batch to reserved temps in the workspace root, the
// secret's mode set on its temp, one mv -f script, the plugin's counts.
func TestSyncInFileBatch(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	auth := r.write("auth.json", "credential-material", 0o644)
	cfg := r.write("config.txt", "plain", 0o644)
	rep, _ := r.in(op("sync-op-1", []map[string]any{
		mapping(auth, r.rpath(".secret/auth.json"), "file", "mode", 0o600),
		mapping(cfg, r.rpath("config.txt"), "file"),
	}))
	assert.Equal(t, []any{opResult("sync-op-1", 2, 19+5)}, r.ok(rep))

	uploads := r.calls("bulk-upload")
	require.Len(t, uploads, 1)
	require.Len(t, uploads[0].Paths, 2)
	for _, p := range uploads[0].Paths {
		assert.Regexp(t, scratchBase, filepath.Base(p))
		assert.Equal(t, r.remote, filepath.Dir(p), "temps are direct children of the workspace")
	}
	perms := r.calls("permissions")
	require.Len(t, perms, 1)
	assert.Equal(t, "600", perms[0].Mode)
	assert.Regexp(t, scratchBase, filepath.Base(perms[0].Paths[0]))
	mv := r.executes("mv -f")
	require.Len(t, mv, 1)
	assert.Equal(t, 2, promotes(mv[0].Command, r.remote))
	assert.Contains(t, mv[0].Command, uploads[0].Paths[0])
	assert.Contains(t, mv[0].Command, r.rpath(".secret/auth.json"))

	assertFile(t, r.rpath(".secret/auth.json"), "credential-material", 0o600)
	assertFile(t, r.rpath("config.txt"), "plain", 0)
	assert.Empty(t, scratch(t, r.remote))
	r.done()
}

// §13.6.22: a failing promote sweeps the staged temps (as the plugin's
// test, the mv script answers exit 1).
func TestSyncInSweepsTempsWhenRenameFails(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.env.Server.AddFault(emulator.Fault{Command: "mv -f", Reply: &emulator.ExecReply{ExitCode: 1, Result: "mv: permission denied"}})
	a := r.write("a.txt", "aaa", 0o644)
	rep, inv := r.in(op("op", []map[string]any{mapping(a, r.rpath("a.txt"), "file")}))
	assert.Regexp(t, `syncIn rename command failed \(exit 1\)`, r.failed(rep))
	spans := r.spans(inv, 3)
	assert.Equal(t, []string{"ensureDirectory", "transfer", "promote"}, spanNames(spans))
	assert.Equal(t, map[string]any{"code": float64(2)}, spanNamed(spans, "promote")["status"], "the failed step is marked")
	assert.Nil(t, spanNamed(spans, "transfer")["status"])
	assert.Equal(t, "Daytona syncIn rename command failed (exit 1): mv: permission denied", r.failed(rep))
	assert.Len(t, r.calls("bulk-upload"), 1)
	sweep := r.executes("rm -f")
	require.NotEmpty(t, sweep)
	assert.Contains(t, sweep[len(sweep)-1].Command, ".paperclip-upload-")
	assert.Empty(t, scratch(t, r.remote), "the sweep removed the uploaded temps for real")
	assertMissing(t, r.rpath("a.txt"))
	r.done()
}

// A target that is a folder fails the promote (the plugin's mv would move
// the temp into it and report success) and the temps are swept.
func TestSyncInRefusesAFolderTarget(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	require.NoError(t, os.MkdirAll(r.rpath("taken/inner"), 0o755))
	a := r.write("a.txt", "aaa", 0o644)
	rep, _ := r.in(op("op", []map[string]any{mapping(a, r.rpath("taken"), "file")}))
	assert.Contains(t, r.failed(rep), "Daytona syncIn rename command failed (exit 43)")
	assert.Empty(t, scratch(t, r.remote))
	assert.Empty(t, scratch(t, r.rpath("taken")))
	r.done()
}

// ---- §13.3 and §13.10 spans ----

func checkSpanBasics(t *testing.T, spans []map[string]any) {
	t.Helper()
	for _, s := range spans {
		assert.Equal(t, "daytona", attr(s, "provider"), "provider on %v", s["name"])
		assert.IsType(t, float64(0), s["startTimeMs"])
		assert.IsType(t, float64(0), s["endTimeMs"])
		assert.LessOrEqual(t, s["startTimeMs"].(float64), s["endTimeMs"].(float64))
		assert.Nil(t, s["status"], "no error status on %v", s["name"])
	}
}

// §13.3.6, 7, 10: a file sync in records ensureDirectory, transfer,
// promote, in order; the transfer carries one guard round trip, the
// inbound direction and its wall time; the others no wall-time attribute.
func TestSyncInFileSpans(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	cfg := r.write("config.txt", "plain", 0o644)
	rep, inv := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")}))
	r.ok(rep)
	spans := r.spans(inv, 3)
	assert.Equal(t, []string{"ensureDirectory", "transfer", "promote"}, spanNames(spans))
	checkSpanBasics(t, spans)
	tr := spanNamed(spans, "transfer")
	assert.Equal(t, float64(1), attr(tr, "transfer.guard.count"))
	assert.Equal(t, "inbound", attr(tr, "transfer.direction"))
	assert.IsType(t, float64(0), attr(tr, "transfer.wall_ms"))
	assert.Nil(t, spanNamed(spans, "pack"))
	assert.Nil(t, attr(spanNamed(spans, "ensureDirectory"), "ensureDirectory.wall_ms"))
	assert.Nil(t, attr(spanNamed(spans, "promote"), "promote.wall_ms"))

	// Without a traceparent, no span is sent.
	inv2 := newInvocation()
	rep = r.h.send(request{method: "environmentSyncIn", params: r.params(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")})), invocation: inv2})[0].wait()
	r.ok(rep)
	r.done() // shutdown waits for spans in flight
	assert.Empty(t, r.h.recordedSpans(inv2))
}

// A file batch the incremental cache finds in place moves nothing, yet its
// trace is the plugin's: ensureDirectory, transfer, promote.
func TestSyncInUnchangedFileSpans(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	cfg := r.write("config.txt", "plain", 0o644)
	r.ok(func() reply {
		rep, _ := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")}))
		return rep
	}())
	before := len(r.executes("mv -f"))
	rep, inv := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")}))
	r.ok(rep)
	assert.Equal(t, before, len(r.executes("mv -f")), "nothing was promoted")
	spans := r.spans(inv, 3)
	assert.Equal(t, []string{"ensureDirectory", "transfer", "promote"}, spanNames(spans))
	checkSpanBasics(t, spans)
	r.done()
}

// §13.3.9, 11, 12: a directory sync in records pack, ensureDirectory,
// transfer, extractTarball; pack has its wall time, transfer one guard.
func TestSyncInDirectorySpans(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.write("assets/a.txt", "alpha", 0o644)
	rep, inv := r.in(op("op", []map[string]any{mapping(r.hostPath("assets"), r.rpath(".paperclip-runtime/assets"), "directory")}))
	r.ok(rep)
	spans := r.spans(inv, 4)
	assert.Equal(t, []string{"pack", "ensureDirectory", "transfer", "extractTarball"}, spanNames(spans))
	checkSpanBasics(t, spans)
	assert.IsType(t, float64(0), attr(spanNamed(spans, "pack"), "pack.wall_ms"))
	assert.Equal(t, float64(1), attr(spanNamed(spans, "transfer"), "transfer.guard.count"))
	assertFile(t, r.rpath(".paperclip-runtime/assets/a.txt"), "alpha", 0)
	r.done()
}

// §13.3.13: a post-upload command with a working directory adds a
// postUploadCommand span.
func TestSyncInPostUploadSpan(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	require.NoError(t, os.MkdirAll(r.rpath("sub"), 0o755))
	cfg := r.write("config.txt", "plain", 0o644)
	rep, inv := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")},
		map[string]any{"command": "pwd > where.txt", "cwd": r.rpath("sub")}))
	r.ok(rep)
	spans := r.spans(inv, 4)
	assert.Equal(t, []string{"ensureDirectory", "transfer", "promote", "postUploadCommand"}, spanNames(spans))
	checkSpanBasics(t, spans)
	assertFile(t, r.rpath("sub/where.txt"), r.rpath("sub")+"\n", 0)
	r.done()
}

// §13.3.8 and §13.10.35, 36: outbound transfers carry the outbound
// direction and one guard round trip for files, two for a directory.
func TestSyncOutSpans(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("out/result.txt", "bytes", 0o644)
	rep, inv := r.out(op("op", []map[string]any{mapping(r.rpath("out/result.txt"), r.hostPath("result.txt"), "file")}))
	r.ok(rep)
	spans := r.spans(inv, 1)
	assert.Equal(t, []string{"transfer"}, spanNames(spans))
	checkSpanBasics(t, spans)
	assert.Equal(t, "outbound", attr(spans[0], "transfer.direction"))
	assert.Equal(t, float64(1), attr(spans[0], "transfer.guard.count"))
	assert.IsType(t, float64(0), attr(spans[0], "transfer.wall_ms"))

	require.NoError(t, os.MkdirAll(r.rpath("out/assets"), 0o755))
	rep, inv = r.out(op("op", []map[string]any{mapping(r.rpath("out/assets"), r.hostPath("assets"), "directory")}))
	assert.Equal(t, []any{opResult("op", 0, 10240)}, r.ok(rep), "an empty folder is an empty GNU tar")
	spans = r.spans(inv, 1)
	assert.Equal(t, "outbound", attr(spans[0], "transfer.direction"))
	assert.Equal(t, float64(2), attr(spans[0], "transfer.guard.count"))
	fi, err := os.Stat(r.hostPath("assets"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	r.done()
}

// ---- §13.4 sync in: directory mappings ----

// §13.4.14: a gzip tar built on the host honouring exclude, symlinks kept
// as links, uploaded to a reserved .tar.gz, extracted by one quoted tar
// command after a mkdir; the tarball is gone afterwards.
func TestSyncInDirectoryTarball(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.write("assets/keep/a.txt", "alpha", 0o644)
	r.write("assets/skip.log", "log", 0o644)
	require.NoError(t, os.Symlink("keep/a.txt", r.hostPath("assets/link.txt")))
	target := r.rpath(".paperclip-runtime/assets")

	// Hold the extract to read the uploaded tarball as the sandbox got it.
	gate := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Command: "tar -xf", Gate: gate, Times: 1})
	p, _ := r.start("environmentSyncIn", op("op", []map[string]any{
		mapping(r.hostPath("assets"), target, "directory", "exclude", []string{"*.log"})}))
	var tarballs []string
	require.True(t, testutil.Eventually(30*time.Second, func() bool {
		tarballs, _ = filepath.Glob(filepath.Join(r.remote, ".paperclip-upload-*.tar.gz"))
		return len(tarballs) == 1 && len(r.calls("bulk-upload")) == 1
	}), "the tarball arrives")
	listing, err := exec.Command("tar", "-tvzf", tarballs[0]).CombinedOutput()
	require.NoError(t, err, string(listing))
	close(gate)
	rep := p.wait()
	ops := r.ok(rep)
	assert.Contains(t, string(listing), "keep/a.txt")
	assert.NotContains(t, string(listing), "skip.log")
	assert.Regexp(t, `link\.txt ->|link\.txt link to`, string(listing))

	uploads := r.calls("bulk-upload")
	require.Len(t, uploads, 1)
	require.Len(t, uploads[0].Paths, 1)
	assert.Regexp(t, `^\.paperclip-upload-.*\.tar\.gz$`, filepath.Base(uploads[0].Paths[0]))
	assert.True(t, strings.HasPrefix(uploads[0].Paths[0], r.remote+"/"))
	mkdir := r.index(func(c emulator.ToolboxCall) bool {
		return c.Route == "execute" && strings.Contains(c.Command, "mkdir -p") && strings.Contains(c.Command, "'"+target+"'") && !strings.Contains(c.Command, "tar -xf")
	})
	upload := r.index(func(c emulator.ToolboxCall) bool { return c.Route == "bulk-upload" })
	require.GreaterOrEqual(t, mkdir, 0)
	assert.Less(t, mkdir, upload, "mkdir before the upload")
	extract := r.executes("tar -xf")
	require.Len(t, extract, 1)
	assert.Contains(t, extract[0].Command, ".paperclip-runtime/assets")
	assert.Regexp(t, `rm -f .*\.paperclip-upload-.*\.tar\.gz`, extract[0].Command)

	// Sandbox side: the tree, the link as a link, the excluded file absent.
	assertFile(t, filepath.Join(target, "keep/a.txt"), "alpha", 0o644)
	assertLink(t, filepath.Join(target, "link.txt"), "keep/a.txt")
	assertMissing(t, filepath.Join(target, "skip.log"))
	assert.Empty(t, scratch(t, r.remote))
	// The plugin's count: files below the source except names equal to an
	// exclude entry (a glob is not matched): a.txt, skip.log, link.txt.
	assert.Equal(t, float64(3), ops[0].(map[string]any)["filesTransferred"])
	r.done()
}

// §13.4.15: followSymlinks stores what a link points to.
func TestSyncInDirectoryFollowsSymlinks(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.write("deref/real.txt", "real", 0o644)
	require.NoError(t, os.Symlink("real.txt", r.hostPath("deref/alias.txt")))
	rep, _ := r.in(op("op", []map[string]any{mapping(r.hostPath("deref"), r.rpath("deref"), "directory", "followSymlinks", true)}))
	r.ok(rep)
	assertFile(t, r.rpath("deref/alias.txt"), "real", 0)
	assertFile(t, r.rpath("deref/real.txt"), "real", 0)
	r.done()
}

// The read-only bundle branch: a second sync of an identical 0555 bundle
// compares and leaves the live bundle alone; a changed one is extracted.
func TestSyncInReadOnlyBundle(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.write("skills/s/SKILL.md", "v1", 0o444)
	require.NoError(t, os.Chmod(r.hostPath("skills/s"), 0o555))
	m := mapping(r.hostPath("skills"), r.rpath(".paperclip-runtime/skills"), "directory", "mode", 0o555)
	r.ok(func() reply { rep, _ := r.in(op("op", []map[string]any{m})); return rep }())
	assertFile(t, r.rpath(".paperclip-runtime/skills/s/SKILL.md"), "v1", 0o444)
	r.ok(func() reply { rep, _ := r.in(op("op", []map[string]any{m})); return rep }())
	extract := r.executes("tar -df")
	require.Len(t, extract, 2, "the compare branch runs for a mode without write bits")
	assert.Empty(t, scratch(t, r.remote), "the compare leaves nothing behind")
	require.NoError(t, os.Chmod(r.hostPath("skills/s"), 0o755))
	r.write("skills/s/SKILL.md", "v2", 0o444)
	require.NoError(t, os.Chmod(r.hostPath("skills/s"), 0o555))
	r.ok(func() reply { rep, _ := r.in(op("op", []map[string]any{m})); return rep }())
	assertFile(t, r.rpath(".paperclip-runtime/skills/s/SKILL.md"), "v2", 0o444)
	require.NoError(t, os.Chmod(r.hostPath("skills/s"), 0o755))
	r.done()
}

// ---- §13.5 sync out: file mappings ----

// §13.5.16: one guard round trip, one download batch reading reserved
// snapshots into temps beside the targets, the secret's mode, the counts.
func TestSyncOutFileBatch(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("out/result.txt", "result-bytes", 0o644)
	r.sandboxWrite("out/secret.key", "secret-bytes", 0o644)
	gate := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-download$`, Gate: gate, Times: 1})
	p, _ := r.start("environmentSyncOut", op("sync-op-out", []map[string]any{
		mapping(r.rpath("out/result.txt"), r.hostPath("result.txt"), "file"),
		mapping(r.rpath("out/secret.key"), r.hostPath("secret.key"), "file", "mode", 0o600),
	}))
	var temps []string
	require.True(t, testutil.Eventually(30*time.Second, func() bool { temps = scratch(t, r.dir); return len(temps) == 2 }))
	for _, tmp := range temps {
		fi, err := os.Stat(tmp)
		require.NoError(t, err)
		if strings.Contains(tmp, "secret") {
			continue
		}
		assert.Zero(t, fi.Size(), "nothing is written before the download")
	}
	close(gate)
	assert.Equal(t, []any{opResult("sync-op-out", 2, 12+12)}, r.ok(p.wait()))
	downloads := r.calls("bulk-download")
	require.Len(t, downloads, 1)
	require.Len(t, downloads[0].Paths, 2)
	for _, src := range downloads[0].Paths {
		assert.True(t, strings.HasPrefix(src, r.remote+"/"))
		assert.Regexp(t, scratchBase, filepath.Base(src), "a snapshot copy, never the source")
	}
	assert.Len(t, r.executes("_pc_resolve"), 1)
	assertFile(t, r.hostPath("result.txt"), "result-bytes", 0)
	assertFile(t, r.hostPath("secret.key"), "secret-bytes", 0o600)
	assert.Empty(t, scratch(t, r.dir))
	assert.Empty(t, scratch(t, r.remote), "snapshots are removed")
	r.done()
}

// A file target that is a symlink is replaced by the file, as the plugin's
// fs.rename replaces it, whatever it points to (a folder included); the
// place it pointed to is left alone.
func TestSyncOutFileReplacesATargetLink(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("out/a.txt", "from the sandbox", 0o644)
	folder := r.hostPath("folder")
	require.NoError(t, os.MkdirAll(folder, 0o755))
	other := r.write("other.txt", "other", 0o644)
	for _, link := range []struct{ name, to string }{{"to-folder", folder}, {"to-file", other}, {"dangling", r.hostPath("nowhere")}} {
		target := r.hostPath(link.name)
		require.NoError(t, os.Symlink(link.to, target))
		rep, _ := r.out(op("op", []map[string]any{mapping(r.rpath("out/a.txt"), target, "file")}))
		assert.Equal(t, []any{opResult("op", 1, 16)}, r.ok(rep), link.name)
		assertFile(t, target, "from the sandbox", 0)
	}
	entries, err := os.ReadDir(folder)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing is written into the folder the link named")
	assertFile(t, other, "other", 0o644)
	assertMissing(t, r.hostPath("nowhere"))
	assert.Empty(t, scratch(t, r.dir))
	r.done()
}

// §13.5.18: the guard resolves, confines, re-checks no-symlink and regular
// file immediately before cp, in one sh -c.
func TestSyncOutGuardScript(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("out/data.txt", "d", 0o644)
	rep, _ := r.out(op("op", []map[string]any{mapping(r.rpath("out/data.txt"), r.hostPath("data.txt"), "file")}))
	r.ok(rep)
	guard := r.executes("_pc_resolve")
	require.Len(t, guard, 1)
	cmd := guard[0].Command
	assert.True(t, strings.HasPrefix(cmd, "sh -c '"))
	assert.Contains(t, cmd, "cp --")
	assert.Contains(t, cmd, `[ -L "$_pc_real" ]`)
	assert.Contains(t, cmd, `[ -f "$_pc_real" ]`)
	assert.Greater(t, strings.Index(cmd, `cp -- "$_pc_real"`), strings.Index(cmd, `[ -L "$_pc_real" ]`))
	assertFile(t, r.hostPath("data.txt"), "d", 0)
	r.done()
}

// The guard's exit codes and messages, byte for byte, each from a real
// sandbox condition; nothing is downloaded and no target is written.
func TestSyncOutGuardRefusals(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600))
	r.sandboxWrite("out/real.txt", "r", 0o644)
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), r.rpath("out/link.txt")))
	require.NoError(t, os.MkdirAll(r.rpath("out/dir"), 0o755))
	realpath, err := exec.LookPath("realpath")
	require.NoError(t, err)

	check := func(name, source, want string, setup func()) {
		t.Helper()
		if setup != nil {
			setup()
		}
		target := r.hostPath(name)
		rep, _ := r.out(op("op", []map[string]any{mapping(source, target, "file")}))
		assert.Equal(t, want, r.failed(rep), name)
		assertMissing(t, target)
		assert.Empty(t, r.calls("bulk-download"), "%s: no download", name)
		assert.Empty(t, scratch(t, r.dir))
	}
	// §13.5.20: a link out of the workspace.
	check("escape", r.rpath("out/link.txt"), "Daytona outbound symlink-escape guard command failed (exit 42): ESCAPE", nil)
	// A source that does not exist resolves (realpath lets the last
	// component be missing) but is not a regular file.
	check("missing", r.rpath("out/none.txt"), "Daytona outbound symlink-escape guard command failed (exit 45): NOTREG", nil)
	// Nor does one below a missing folder.
	check("missing-dir", r.rpath("out/none/x.txt"), "Daytona outbound symlink-escape guard command failed (exit 42): realpath: "+r.rpath("out/none/x.txt")+": No such file or directory\nESCAPE", nil)
	// Not a regular file.
	check("notreg", r.rpath("out/dir"), "Daytona outbound symlink-escape guard command failed (exit 45): NOTREG", nil)
	// A source swapped for a link between the check and the copy: the
	// sandbox's realpath swaps it right after resolving.
	shims := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(shims, "realpath"), []byte(fmt.Sprintf(`#!/bin/sh
res=$(%s "$@") || exit $?
case "$res" in */out/real.txt) rm -f "$res"; ln -s %s "$res" ;; esac
printf '%%s\n' "$res"
`, realpath, filepath.Join(outside, "secret"))), 0o755))
	check("swapped", r.rpath("out/real.txt"), "Daytona outbound symlink-escape guard command failed (exit 44): REPLACED", func() {
		require.NoError(t, r.env.Server.SetProcessEnv(r.l.id, map[string]string{"PATH": shims + ":" + os.Getenv("PATH")}))
	})
	// §13.5.21: no canonicalizer at all fails closed.
	bare := t.TempDir()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(sh, filepath.Join(bare, "sh")))
	check("no-canonicalizer", r.rpath("out/dir"), "Daytona outbound symlink-escape guard command failed (exit 40): no path canonicalizer available", func() {
		require.NoError(t, r.env.Server.SetProcessEnv(r.l.id, map[string]string{"PATH": bare}))
	})
	require.NoError(t, r.env.Server.SetProcessEnv(r.l.id, map[string]string{"PATH": os.Getenv("PATH")}))
	// A root that cannot be resolved.
	r.remote = r.rpath("no/such/root")
	check("no-root", r.rpath("x.txt"), "Daytona outbound symlink-escape guard command failed (exit 41): realpath: "+r.remote+": No such file or directory\ncannot resolve root", nil)
	b, err := os.ReadFile(filepath.Join(outside, "secret"))
	require.NoError(t, err)
	assert.Equal(t, "host secret", string(b))
	r.done()
}

// §13.5.19: a download that fails for one file writes no target at all.
func TestSyncOutDownloadFailureWritesNothing(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("ok.txt", "ok", 0o644)
	r.sandboxWrite("missing.txt", "soon gone", 0o644)
	gate := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-download$`, Gate: gate, Times: 1})
	p, _ := r.start("environmentSyncOut", op("op", []map[string]any{
		mapping(r.rpath("ok.txt"), r.hostPath("ok.txt"), "file"),
		mapping(r.rpath("missing.txt"), r.hostPath("missing.txt"), "file"),
	}))
	// The snapshot of missing.txt vanishes before the download reads it.
	// Wait for its content, not only its name: the copy may still be
	// writing it when both names show.
	var gone string
	require.True(t, testutil.Eventually(30*time.Second, func() bool {
		for _, s := range scratch(t, r.remote) {
			if b, _ := os.ReadFile(s); string(b) == "soon gone" {
				gone = s
				return true
			}
		}
		return false
	}))
	require.NoError(t, os.Remove(gone))
	close(gate)
	msg := r.failed(p.wait())
	assert.Regexp(t, `download failed for .*missing\.txt: `, msg)
	assert.True(t, strings.HasPrefix(msg, "Daytona syncOut download failed for "+r.rpath("missing.txt")+": file not found: "), msg)
	assertMissing(t, r.hostPath("ok.txt"))
	assertMissing(t, r.hostPath("missing.txt"))
	assert.Empty(t, scratch(t, r.dir))
	assert.Empty(t, scratch(t, r.remote))
	r.done()
}

// §13.5.17: a sandbox deleted behind the worker's back fails sync out with
// exactly daytona_sandbox_not_found (whether the handle was cached or not).
func TestSyncOutSandboxNotFound(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, `,"reuseLease":true`)
	r.sandboxWrite("a.txt", "a", 0o644)
	require.NoError(t, deleteBehindBack(r))
	rep, _ := r.out(op("op", []map[string]any{mapping(r.rpath("a.txt"), r.hostPath("a.txt"), "file")}))
	assert.Equal(t, "daytona_sandbox_not_found", r.failed(rep))
	// A fresh worker has no cached handle: the lookup itself finds nothing.
	h2 := startHost(t, hostOptions{})
	r2 := *r
	r2.h = h2
	rep = h2.call("environmentSyncOut", r2.params(op("op", []map[string]any{mapping(r.rpath("a.txt"), r.hostPath("a.txt"), "file")})), newInvocation()).wait()
	assert.Equal(t, "daytona_sandbox_not_found", rep.Error["message"])
	assertMissing(t, r.hostPath("a.txt"))
	h2.shutdown()
	r.h.shutdown()
}

// A sandbox that vanishes while its files are being downloaded.
func TestSyncOutSandboxVanishesMidway(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("a.txt", "a", 0o644)
	gate := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-download$`, Gate: gate, Times: 1})
	p, _ := r.start("environmentSyncOut", op("op", []map[string]any{mapping(r.rpath("a.txt"), r.hostPath("a.txt"), "file")}))
	require.True(t, testutil.Eventually(30*time.Second, func() bool { return requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-download") == 1 }))
	require.NoError(t, deleteBehindBack(r))
	close(gate)
	assert.Equal(t, "daytona_sandbox_not_found", r.failed(p.wait()))
	assertMissing(t, r.hostPath("a.txt"))
	assert.Empty(t, scratch(t, r.dir))
	r.h.shutdown()
}

// deleteBehindBack deletes the lease's sandbox through the API, as another
// client would.
func deleteBehindBack(r *syncRig) error {
	c, err := daytona.New(daytona.Config{APIKey: r.env.APIKey, APIURL: r.env.APIURL})
	if err != nil {
		return err
	}
	if _, err := c.Delete(context.Background(), r.l.id); err != nil {
		return err
	}
	if !testutil.Eventually(10*time.Second, func() bool { _, ok := r.env.Server.Sandbox(r.l.id); return !ok }) {
		return fmt.Errorf("sandbox %s still exists", r.l.id)
	}
	return nil
}

// ---- §13.7 sync out: directories and untrusted archives ----

// §13.7.26: a directory round trip keeps contents, a 0600 file and an
// in-tree symlink.
func TestSyncDirectoryRoundTrip(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.write("src/nested/data.txt", "hello world", 0o644)
	r.write("src/secret", "top-secret", 0o600)
	require.NoError(t, os.Symlink("nested/data.txt", r.hostPath("src/shortcut")))
	r.ok(func() reply {
		rep, _ := r.in(op("in", []map[string]any{mapping(r.hostPath("src"), r.rpath("proj"), "directory")}))
		return rep
	}())
	assertFile(t, r.rpath("proj/secret"), "top-secret", 0o600)
	assertLink(t, r.rpath("proj/shortcut"), "nested/data.txt")

	rep, _ := r.out(op("out", []map[string]any{mapping(r.rpath("proj"), r.hostPath("restored"), "directory")}))
	ops := r.ok(rep)
	assert.Equal(t, float64(3), ops[0].(map[string]any)["filesTransferred"])
	assertFile(t, r.hostPath("restored/nested/data.txt"), "hello world", 0)
	assertFile(t, r.hostPath("restored/secret"), "top-secret", 0o600)
	assertLink(t, r.hostPath("restored/shortcut"), "nested/data.txt")
	tars := r.executes("tar -c --no-xattrs")
	require.Len(t, tars, 1)
	assert.Contains(t, tars[0].Command, "find . -mindepth 1 -maxdepth 1 -print0")
	assert.Empty(t, scratch(t, r.remote), "the sandbox tarball is deleted")
	assert.Len(t, r.calls("delete"), 1)
	assert.Empty(t, scratch(t, r.dir), "no staging left beside the target")
	r.done()
}

// differences.txt sync-out-owners: a worker running as root restores a
// sandbox tree as its own, whoever owns it in the sandbox (host GNU tar as
// root would give it the archive's owners).
func TestSyncOutKeepsTheWorkersOwnership(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the sandbox files another owner")
	}
	r := newSyncRig(t, "")
	r.sandboxWrite("proj/a.txt", "a", 0o644)
	r.sandboxWrite("proj/d/b.txt", "b", 0o644)
	require.NoError(t, os.Symlink("a.txt", r.rpath("proj/l")))
	require.NoError(t, filepath.Walk(r.rpath("proj"), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 1234, 2345)
	}))
	rep, _ := r.out(op("out", []map[string]any{mapping(r.rpath("proj"), r.hostPath("restored"), "directory")}))
	r.ok(rep)
	n := 0
	require.NoError(t, filepath.Walk(r.hostPath("restored"), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, [2]uint32{0, 0}, [2]uint32{st.Uid, st.Gid}, "owner of %s", p)
		n++
		return nil
	}))
	assert.Equal(t, 5, n, "the target, a.txt, d, d/b.txt and l")
	r.done()
}

// A host target below a regular file fails as the plugin's recursive
// fs.mkdir fails, naming the folder it was asked for (EEXIST when that is
// the file itself), and leaves nothing behind on either side.
func TestSyncOutTargetBelowAFile(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("s.txt", "s", 0o644)
	r.sandboxWrite("sd/a.txt", "a", 0o644)
	plain := r.write("plain.txt", "keep", 0o644)
	tests := []struct {
		name string
		m    map[string]any
		want string
	}{
		{"file whose folder is a file", mapping(r.rpath("s.txt"), plain+"/t.txt", "file"),
			"EEXIST: file already exists, mkdir '" + plain + "'"},
		{"file below a file", mapping(r.rpath("s.txt"), plain+"/x/t.txt", "file"),
			"ENOTDIR: not a directory, mkdir '" + plain + "/x'"},
		{"folder below a file", mapping(r.rpath("sd"), plain+"/restored", "directory"),
			"ENOTDIR: not a directory, mkdir '" + plain + "/restored'"},
		{"folder deeper below a file", mapping(r.rpath("sd"), plain+"/x/restored", "directory"),
			"ENOTDIR: not a directory, mkdir '" + plain + "/x/restored'"},
	}
	for _, tt := range tests {
		rep, _ := r.out(op("op", []map[string]any{tt.m}))
		assert.Equal(t, tt.want, r.failed(rep), tt.name)
		assert.Empty(t, scratch(t, r.remote), "%s: the sandbox scratch is removed", tt.name)
		assert.Empty(t, scratch(t, r.dir), tt.name)
		assertFile(t, plain, "keep", 0o644)
	}
	r.done()
}

// hostileTar makes the sandbox's tar write archive instead of what it was
// asked to (a compromised sandbox), for the rest of the rig's life.
func (r *syncRig) hostileTar(archive []byte) {
	r.t.Helper()
	dir := r.t.TempDir()
	payload := filepath.Join(dir, "payload.tar")
	require.NoError(r.t, os.WriteFile(payload, archive, 0o644))
	require.NoError(r.t, os.WriteFile(filepath.Join(dir, "tar"), []byte(`#!/bin/sh
out=""
while [ $# -gt 0 ]; do case "$1" in -f) out="$2"; shift ;; esac; shift; done
cp `+payload+` "$out"
`), 0o755))
	require.NoError(r.t, r.env.Server.SetProcessEnv(r.l.id, map[string]string{"PATH": dir + ":" + os.Getenv("PATH")}))
}

func hostileArchive(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		h := h
		body := []byte(h.Linkname)
		if h.Typeflag == tar.TypeReg {
			h.Linkname = ""
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(&h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(body)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// §13.7.23, 24, 25 and the other hostile archives: each is refused before
// anything is extracted; the target is not created and nothing is written
// outside it.
func TestSyncOutRefusesHostileArchives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []tar.Header
		want    string
	}{
		{"traversal", []tar.Header{{Typeflag: tar.TypeReg, Name: "../escape.txt", Linkname: "x"}},
			`escapes the extraction dir`},
		{"absolute", []tar.Header{{Typeflag: tar.TypeReg, Name: "/tmp/daytona-worker-abs-escape", Linkname: "x"}},
			`escapes the extraction dir`},
		{"symlink out", []tar.Header{{Typeflag: tar.TypeSymlink, Name: "evil", Linkname: "../../outside.txt"}},
			`link whose target escapes the extraction dir`},
		{"delimiter in a link name", []tar.Header{{Typeflag: tar.TypeSymlink, Name: "evil -> decoy", Linkname: "../../outside.txt"}},
			`ambiguous symlink entry`},
		{"symlink out then a file through it", []tar.Header{{Typeflag: tar.TypeSymlink, Name: "out", Linkname: "../.."},
			{Typeflag: tar.TypeReg, Name: "out/planted.txt", Linkname: "x"}}, `link whose target escapes the extraction dir`},
		{"in-tree symlink then a file through it", []tar.Header{{Typeflag: tar.TypeDir, Name: "sub/"},
			{Typeflag: tar.TypeSymlink, Name: "via", Linkname: "sub"}, {Typeflag: tar.TypeReg, Name: "via/planted.txt", Linkname: "x"}},
			`written through a link`},
		{"hard link out", []tar.Header{{Typeflag: tar.TypeLink, Name: "h", Linkname: "../outside.txt"}},
			`link whose target escapes the extraction dir`},
		{"hard link to a host file", []tar.Header{{Typeflag: tar.TypeLink, Name: "h", Linkname: "outside.txt"}},
			`hardlink to a member that is not a regular file of the archive`},
		{"device", []tar.Header{{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3}},
			`unparseable entry listing`},
		{"link chain out", []tar.Header{{Typeflag: tar.TypeSymlink, Name: "a", Linkname: "."},
			{Typeflag: tar.TypeSymlink, Name: "b", Linkname: "a/.."}}, `link whose target escapes the extraction dir`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newSyncRig(t, "")
			require.NoError(t, os.MkdirAll(r.rpath("proj"), 0o755))
			hostRoot := r.hostPath("root")
			require.NoError(t, os.MkdirAll(hostRoot, 0o755))
			require.NoError(t, os.WriteFile(r.hostPath("root/outside.txt"), []byte("host"), 0o644))
			r.hostileTar(hostileArchive(t, tt.entries...))
			rep, _ := r.out(op("op", []map[string]any{mapping(r.rpath("proj"), filepath.Join(hostRoot, "restored"), "directory")}))
			msg := r.failed(rep)
			assert.Regexp(t, tt.want, msg)
			assert.True(t, strings.HasPrefix(msg, "Daytona syncOut refusing"), msg)
			assertMissing(t, filepath.Join(hostRoot, "restored"))
			assertMissing(t, filepath.Join(hostRoot, "escape.txt"))
			assertMissing(t, filepath.Join(r.dir, "escape.txt"))
			assertMissing(t, "/tmp/daytona-worker-abs-escape")
			entries, err := os.ReadDir(hostRoot)
			require.NoError(t, err)
			require.Len(t, entries, 1, "only outside.txt: no staging left")
			b, _ := os.ReadFile(r.hostPath("root/outside.txt"))
			assert.Equal(t, "host", string(b))
			assert.Empty(t, scratch(t, r.remote), "the sandbox tarball is deleted")
			r.done()
		})
	}
}

// ---- §13.8 post-upload commands ----

// §13.8.27: verbatim, in order, after the upload, in the workspace unless a
// cwd is given.
func TestSyncInPostUploadCommandsVerbatim(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	cfg := r.write("config.txt", "plain", 0o644)
	first := `printf 'first\n' >> order.log`
	second := "chmod 600 config.txt && printf 'second\\n' >> order.log"
	rep, _ := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")},
		map[string]any{"command": first}, map[string]any{"command": second}))
	r.ok(rep)
	cmds := r.calls("execute")
	i1 := r.index(func(c emulator.ToolboxCall) bool { return c.Route == "execute" && c.Command == first })
	i2 := r.index(func(c emulator.ToolboxCall) bool { return c.Route == "execute" && c.Command == second })
	up := r.index(func(c emulator.ToolboxCall) bool { return c.Route == "bulk-upload" })
	require.True(t, i1 >= 0 && i2 >= 0, "%v", cmds)
	assert.Less(t, up, i1)
	assert.Less(t, i1, i2)
	j := r.journal()
	assert.Equal(t, r.remote, j[i1].Cwd, "the workspace is the default cwd")
	assert.Equal(t, 60, j[i1].Timeout, "the call's timeout (timeoutMs 60000 → 60 s)")
	assertFile(t, r.rpath("order.log"), "first\nsecond\n", 0)
	assertFile(t, r.rpath("config.txt"), "plain", 0o600)
	r.done()
}

// §13.8.28: a failing command stops the rest, with the plugin's message.
func TestSyncInPostUploadFailFast(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	cfg := r.write("config.txt", "plain", 0o644)
	rep, _ := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")},
		map[string]any{"command": "echo boom; exit 7"}, map[string]any{"command": "touch should-not-run"}))
	assert.Equal(t, "Daytona post-upload command failed (exit 7): boom", r.failed(rep))
	assert.Empty(t, r.executes("should-not-run"))
	assertMissing(t, r.rpath("should-not-run"))
	r.done()
}

// A host folder with content where the sandbox now has a file fails the
// sync out before anything on the host changes (row
// sync-out-extract-conflict: host tar would extract the rest, then fail).
func TestSyncOutConflictChangesNothing(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("sd/busy", "file", 0o644)
	r.sandboxWrite("sd/a.txt", "new", 0o644)
	require.NoError(t, os.MkdirAll(r.hostPath("t/busy/inner"), 0o755))
	r.write("t/a.txt", "old", 0o644)
	rep, _ := r.out(op("op", []map[string]any{mapping(r.rpath("sd"), r.hostPath("t"), "directory")}))
	assert.Equal(t, "ENOTEMPTY: directory not empty, rename '"+r.hostPath("t/busy")+"'", r.failed(rep))
	assertFile(t, r.hostPath("t/a.txt"), "old", 0)
	assert.DirExists(t, r.hostPath("t/busy/inner"))
	assert.Empty(t, scratch(t, r.hostPath("t")))
	r.done()
}

// A bulk download Daytona refuses as a whole fails with Daytona's message
// (row sync-out-download-refused: the SDK says "[object Object]"), for a
// file batch and a directory alike.
func TestSyncOutDownloadRefused(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("o/c.txt", "c", 0o644)
	for _, m := range []map[string]any{mapping(r.rpath("o/c.txt"), r.hostPath("c.txt"), "file"), mapping(r.rpath("o"), r.hostPath("o"), "directory")} {
		r.env.Server.AddFault(emulator.Fault{Method: "POST", Path: `/files/bulk-download$`, Status: 400, Times: 1})
		rep, _ := r.out(op("op", []map[string]any{m}))
		assert.Equal(t, "emulator fault: injected Bad Request", r.failed(rep), "%v", m["kind"])
	}
	assertMissing(t, r.hostPath("c.txt"))
	assertMissing(t, r.hostPath("o"))
	assert.Empty(t, scratch(t, r.remote))
	r.done()
}

// A file source that is not a regular file is read as the plugin's upload
// reads it: /dev/null gives an empty file, a socket fails to open (ENXIO);
// a FIFO, which would block the upload, is refused (row sync-in-fifo-source).
func TestSyncInSpecialFileSources(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	rep, _ := r.in(op("op", []map[string]any{mapping("/dev/null", r.rpath("null"), "file")}))
	assert.Equal(t, []any{opResult("op", 1, 0)}, r.ok(rep))
	assertFile(t, r.rpath("null"), "", 0)
	// A short folder name: a socket's path is bounded (108 bytes).
	sockDir, err := os.MkdirTemp("", "sock")
	require.NoError(t, err)
	defer os.RemoveAll(sockDir)
	sock := filepath.Join(sockDir, "s")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	rep, _ = r.in(op("op", []map[string]any{mapping(sock, r.rpath("sock"), "file")}))
	assert.Equal(t, "ENXIO: no such device or address, open '"+sock+"'", r.failed(rep))
	assertMissing(t, r.rpath("sock"))
	fifo := r.hostPath("fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	rep, _ = r.in(op("op", []map[string]any{mapping(fifo, r.rpath("fifo"), "file")}))
	assert.Equal(t, "Daytona syncIn source is a named pipe: "+fifo, r.failed(rep))
	assert.Empty(t, scratch(t, r.remote))
	r.done()
}

// A blank post-upload command goes to Daytona as the SDK sends it, and
// Daytona's refusal is the error (the files have landed, as in the plugin).
func TestSyncInPostUploadBlankCommand(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	cfg := r.write("config.txt", "plain", 0o644)
	for _, blank := range []string{"", "  \t"} {
		rep, _ := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")},
			map[string]any{"command": blank}, map[string]any{"command": "touch should-not-run"}))
		assert.Equal(t, "bad request: command cannot be empty or whitespace-only", r.failed(rep), "%q", blank)
		assertFile(t, r.rpath("config.txt"), "plain", 0)
		assertMissing(t, r.rpath("should-not-run"))
	}
	r.done()
}

// §13.8.29, 30: the merged git-workspace operation: two tarballs in one
// upload and one rename, the extracts in order, fail-fast.
func TestSyncInMergedWorkspaceOperation(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	mkTar := func(name, file, content string) (string, int) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
		out := r.hostPath(name)
		b, err := exec.Command("tar", "-cf", out, "-C", dir, file).CombinedOutput()
		require.NoError(t, err, string(b))
		fi, err := os.Stat(out)
		require.NoError(t, err)
		return out, int(fi.Size())
	}
	gitTar, gitSize := mkTar("git-workspace.tar", "HISTORY", "git-bytes")
	wsTar, wsSize := mkTar("workspace.tar", "README", "overlay-bytes")
	runtime := r.rpath(".paperclip-runtime/adapter")
	extract := func(tarPath string) string {
		return fmt.Sprintf("mkdir -p '%s' && tar -xf '%s' -C '%s' && rm -f '%s'", r.rpath("ws"), tarPath, r.rpath("ws"), tarPath)
	}
	gitCmd := extract(runtime + "/git-workspace-upload.tar")
	wsCmd := extract(runtime + "/workspace-upload.tar")
	files := []map[string]any{
		mapping(gitTar, runtime+"/git-workspace-upload.tar", "file", "access", "rw", "writablePath", r.remote),
		mapping(wsTar, runtime+"/workspace-upload.tar", "file", "access", "rw", "writablePath", r.remote),
	}
	rep, _ := r.in(op("merged-workspace", files, map[string]any{"command": gitCmd}, map[string]any{"command": wsCmd}))
	assert.Equal(t, []any{opResult("merged-workspace", 2, gitSize+wsSize)}, r.ok(rep))
	uploads := r.calls("bulk-upload")
	require.Len(t, uploads, 1)
	assert.Len(t, uploads[0].Paths, 2)
	mv := r.executes("mv -f")
	require.Len(t, mv, 1)
	assert.Equal(t, 2, promotes(mv[0].Command, r.remote))
	ig := r.index(func(c emulator.ToolboxCall) bool { return c.Command == gitCmd })
	iw := r.index(func(c emulator.ToolboxCall) bool { return c.Command == wsCmd })
	up := r.index(func(c emulator.ToolboxCall) bool { return c.Route == "bulk-upload" })
	assert.True(t, up < ig && ig < iw, "upload %d, git %d, overlay %d", up, ig, iw)
	assertFile(t, r.rpath("ws/HISTORY"), "git-bytes", 0)
	assertFile(t, r.rpath("ws/README"), "overlay-bytes", 0)
	assertMissing(t, runtime+"/git-workspace-upload.tar")

	// §13.8.30: the git extract fails; the overlay and the deletions never run.
	r.env.Server.ResetJournal(r.l.id)
	failing := "echo broken history; exit 5"
	rep, _ = r.in(op("merged-workspace", files, map[string]any{"command": failing}, map[string]any{"command": wsCmd},
		map[string]any{"command": "rm -rf -- ws/README"}))
	assert.Equal(t, "Daytona post-upload command failed (exit 5): broken history", r.failed(rep))
	assert.Len(t, r.executes(failing), 1)
	assert.Empty(t, r.executes(wsCmd))
	assert.Empty(t, r.executes("rm -rf -- ws/README"))
	assertFile(t, r.rpath("ws/README"), "overlay-bytes", 0)
	r.done()
}

// §13.8.31: no post-upload commands, absent or empty, means no extra exec.
func TestSyncInNoPostUploadCommandsNoExtraExec(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	cfg := r.write("config.txt", "plain", 0o644)
	files := []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")}
	r.ok(func() reply { rep, _ := r.in(op("op", files)); return rep }())
	baseline := len(r.calls("execute"))
	r.env.Server.ResetJournal(r.l.id)
	// A new target: the same one would be skipped as already there.
	files = []map[string]any{mapping(cfg, r.rpath("config2.txt"), "file")}
	r.ok(func() reply {
		rep, _ := r.in(map[string]any{"operationId": "op", "files": files, "postUploadCommands": []any{}})
		return rep
	}())
	assert.Equal(t, baseline, len(r.calls("execute")))
	r.done()
}

// ---- §13.9 concurrency and teardown ----

// §13.9.32: two sync ins run at once with distinct reserved names.
func TestSyncInConcurrentCalls(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	a := r.write("a.txt", "a", 0o644)
	b := r.write("b.txt", "b", 0o644)
	gate := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-upload$`, Gate: gate})
	pa, _ := r.start("environmentSyncIn", op("in-a", []map[string]any{mapping(a, r.rpath("a.txt"), "file")}))
	pb, _ := r.start("environmentSyncIn", op("in-b", []map[string]any{mapping(b, r.rpath("b.txt"), "file")}))
	require.True(t, testutil.Eventually(30*time.Second, func() bool {
		return requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-upload") == 2
	}), "both uploads are in flight at once")
	close(gate)
	r.ok(pa.wait())
	r.ok(pb.wait())
	var dests []string
	for _, c := range r.calls("bulk-upload") {
		dests = append(dests, c.Paths...)
	}
	require.Len(t, dests, 2)
	assert.NotEqual(t, dests[0], dests[1])
	for _, d := range dests {
		assert.Regexp(t, scratchBase, filepath.Base(d))
		assert.Equal(t, r.remote, filepath.Dir(d))
	}
	assertFile(t, r.rpath("a.txt"), "a", 0)
	assertFile(t, r.rpath("b.txt"), "b", 0)
	r.done()
}

// §13.9.33: two sync outs reach their downloads at once.
func TestSyncOutConcurrentCalls(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	r.sandboxWrite("a.txt", "bytes", 0o644)
	r.sandboxWrite("b.txt", "bytes", 0o644)
	gate := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-download$`, Gate: gate})
	pa, _ := r.start("environmentSyncOut", op("a", []map[string]any{mapping(r.rpath("a.txt"), r.hostPath("a.txt"), "file")}))
	pb, _ := r.start("environmentSyncOut", op("b", []map[string]any{mapping(r.rpath("b.txt"), r.hostPath("b.txt"), "file")}))
	require.True(t, testutil.Eventually(30*time.Second, func() bool {
		return requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-download") == 2
	}))
	close(gate)
	r.ok(pa.wait())
	r.ok(pb.wait())
	var sources []string
	for _, c := range r.calls("bulk-download") {
		sources = append(sources, c.Paths...)
	}
	require.Len(t, sources, 2)
	assert.NotEqual(t, sources[0], sources[1])
	for _, s := range sources {
		assert.True(t, strings.HasPrefix(s, r.remote+"/"))
		assert.Regexp(t, scratchBase, filepath.Base(s))
	}
	assertFile(t, r.hostPath("a.txt"), "bytes", 0)
	assertFile(t, r.hostPath("b.txt"), "bytes", 0)
	r.done()
}

// §13.9.34: a destroy waits for the syncs in progress on its lease.
func TestDestroyWaitsForActiveSyncs(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	a := r.write("a.txt", "a", 0o644)
	r.sandboxWrite("b.txt", "b", 0o644)
	upGate, downGate := make(chan struct{}), make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-upload$`, Gate: upGate})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-download$`, Gate: downGate})
	pin, _ := r.start("environmentSyncIn", op("in", []map[string]any{mapping(a, r.rpath("a.txt"), "file")}))
	pout, _ := r.start("environmentSyncOut", op("out", []map[string]any{mapping(r.rpath("b.txt"), r.hostPath("b.txt"), "file")}))
	require.True(t, testutil.Eventually(30*time.Second, func() bool {
		return requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-upload") == 1 &&
			requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-download") == 1
	}))
	const routeDelete = "DELETE /api/sandbox/{idOrName}"
	destroy := r.h.call("environmentDestroyLease", r.h.releaseParams(r.l, nil), "")
	time.Sleep(300 * time.Millisecond) // a destroy that did not wait would have deleted by now
	assert.Zero(t, requestCount(r.env, routeDelete), "delete must wait for the syncs")
	close(upGate)
	r.ok(pin.wait())
	time.Sleep(100 * time.Millisecond)
	assert.Zero(t, requestCount(r.env, routeDelete), "delete must wait for the sync out")
	close(downGate)
	r.ok(pout.wait())
	rep := destroy.wait()
	require.Nil(t, rep.Error)
	assert.Equal(t, map[string]any{"providerLeaseId": r.l.id, "state": "destroyed"}, rep.Result)
	assert.Equal(t, 1, requestCount(r.env, routeDelete))
	assert.Equal(t, 1, requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-upload"))
	assert.Equal(t, 1, requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-download"))
	assertFile(t, r.hostPath("b.txt"), "b", 0)
	r.h.shutdown()
}

// A sync that arrives while its lease is being released waits for the
// release and is then refused, as the plugin's gates make it; the sync that
// was running when the release came finishes first.
func TestSyncDuringReleaseIsRefused(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	a := r.write("a.txt", "a", 0o644)
	upload := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Path: `/files/bulk-upload$`, Gate: upload, Times: 1})
	first, _ := r.start("environmentSyncIn", op("first", []map[string]any{mapping(a, r.rpath("a.txt"), "file")}))
	require.True(t, testutil.Eventually(30*time.Second, func() bool {
		return requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-upload") == 1
	}))
	// Hold the release at the refresh it makes once the first sync is done.
	const routeGet = "GET /api/sandbox/{idOrName}"
	gets := requestCount(r.env, routeGet)
	refresh := make(chan struct{})
	r.env.Server.AddFault(emulator.Fault{Method: "GET", Path: `^/api/sandbox/` + r.l.id + `$`, Gate: refresh, Times: 1})
	release := r.h.call("environmentReleaseLease", r.h.releaseParams(r.l, nil), "")
	close(upload)
	r.ok(first.wait())
	require.True(t, testutil.Eventually(30*time.Second, func() bool { return requestCount(r.env, routeGet) > gets }),
		"the release reaches its refresh")
	late, _ := r.start("environmentSyncIn", op("late", []map[string]any{mapping(a, r.rpath("late.txt"), "file")}))
	close(refresh)
	require.Nil(t, release.wait().Error)
	assert.Equal(t, "Daytona sandbox lease "+r.l.id+" is no longer active.", r.failed(late.wait()))
	assert.Equal(t, 1, requestCount(r.env, "POST /toolbox/{sandboxId}/files/bulk-upload"), "the late sync never reached the sandbox")
	r.h.shutdown()
}

// ---- bad input ----

// Bad input is refused with a clear error before anything moves on either
// side: the sandbox receives nothing, the host keeps what it had.
func TestSyncRejectsBadInput(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	good := r.write("good.txt", "g", 0o644)
	r.write("dir/x", "x", 0o644)
	r.sandboxWrite("there.txt", "t", 0o644)
	inTests := []struct {
		name string
		ops  []map[string]any
		want string
	}{
		{"target outside the workspace", []map[string]any{op("op", []map[string]any{
			mapping(good, r.rpath("ok.txt"), "file"), mapping(good, "/etc/passwd-from-sync", "file")})},
			"Daytona sync target path escapes the workspace remote dir: /etc/passwd-from-sync"},
		{"target with ..", []map[string]any{op("op", []map[string]any{mapping(good, r.remote+"/a/../b", "file")})},
			"Daytona sync target path is not a confined absolute path: " + r.remote + "/a/../b"},
		{"relative target", []map[string]any{op("op", []map[string]any{mapping(good, "rel/x", "file")})},
			"Daytona sync target path is not a confined absolute path: rel/x"},
		{"missing source", []map[string]any{op("op", []map[string]any{mapping(good, r.rpath("ok.txt"), "file")}),
			op("op2", []map[string]any{mapping(r.hostPath("nope.txt"), r.rpath("nope.txt"), "file")})},
			"ENOENT: no such file or directory, stat '" + r.hostPath("nope.txt") + "'"},
		{"missing directory source", []map[string]any{op("op", []map[string]any{mapping(r.hostPath("nodir"), r.rpath("d"), "directory")})},
			"ENOENT: no such file or directory, opendir '" + r.hostPath("nodir") + "'"},
		{"a folder as a file source", []map[string]any{op("op", []map[string]any{mapping(r.hostPath("dir"), r.rpath("d"), "file")})},
			"EISDIR: illegal operation on a directory, read"},
		{"cwd outside", []map[string]any{op("op", []map[string]any{mapping(good, r.rpath("ok.txt"), "file")},
			map[string]any{"command": "true", "cwd": "/"})},
			"Daytona sync cwd path escapes the workspace remote dir: /"},
	}
	for _, tt := range inTests {
		rep, _ := r.in(tt.ops...)
		assert.Equal(t, tt.want, r.failed(rep), tt.name)
		assert.Empty(t, r.journal(), "%s: the sandbox received nothing", tt.name)
		assertMissing(t, r.rpath("ok.txt"))
	}
	outTests := []struct {
		name string
		ops  []map[string]any
		want string
	}{
		{"source outside", []map[string]any{op("op", []map[string]any{
			mapping(r.rpath("there.txt"), r.hostPath("t1"), "file"), mapping("/etc/hostname", r.hostPath("t2"), "file")})},
			"Daytona sync source path escapes the workspace remote dir: /etc/hostname"},
		{"source with ..", []map[string]any{op("op", []map[string]any{mapping(r.remote+"/x/../there.txt", r.hostPath("t1"), "file")})},
			"Daytona sync source path is not a confined absolute path: " + r.remote + "/x/../there.txt"},
		{"directory source outside", []map[string]any{op("op", []map[string]any{mapping("/etc", r.hostPath("etc"), "directory")})},
			"Daytona sync source path escapes the workspace remote dir: /etc"},
		{"a folder as a file target", []map[string]any{op("op", []map[string]any{mapping(r.rpath("there.txt"), r.hostPath("dir"), "file")})},
			// As the plugin's rename of its temp beside the target words it.
			"EISDIR: illegal operation on a directory, rename '" + r.hostPath(".paperclip-upload-<uuid>") + "' -> '" + r.hostPath("dir") + "'"},
		// A trailing slash: rename(2) says ENOTDIR, a folder there or not.
		{"a folder with a trailing slash as a file target", []map[string]any{op("op", []map[string]any{mapping(r.rpath("there.txt"), r.hostPath("dir")+"/", "file")})},
			"ENOTDIR: not a directory, rename '" + r.hostPath(".paperclip-upload-<uuid>") + "' -> '" + r.hostPath("dir") + "/'"},
		{"a new name with a trailing slash as a file target", []map[string]any{op("op", []map[string]any{mapping(r.rpath("there.txt"), r.hostPath("new")+"/", "file")})},
			"ENOTDIR: not a directory, rename '" + r.hostPath(".paperclip-upload-<uuid>") + "' -> '" + r.hostPath("new") + "/'"},
		// An empty host target, as the plugin's rename of its temp (made
		// in ".") and its mkdir fail on it.
		{"an empty file target", []map[string]any{op("op", []map[string]any{mapping(r.rpath("there.txt"), "", "file")})},
			"ENOENT: no such file or directory, rename '.paperclip-upload-<uuid>' -> ''"},
		{"an empty folder target", []map[string]any{op("op", []map[string]any{mapping(r.rpath("there.txt"), "", "directory")})},
			"ENOENT: no such file or directory, mkdir ''"},
	}
	tempUUID := regexp.MustCompile(`(\.paperclip-upload-)[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	for _, tt := range outTests {
		rep, _ := r.out(tt.ops...)
		assert.Equal(t, tt.want, tempUUID.ReplaceAllString(r.failed(rep), "${1}<uuid>"), tt.name)
		assert.Empty(t, r.journal(), "%s: the sandbox received nothing", tt.name)
		assertMissing(t, r.hostPath("t1"))
	}
	// Lease and params problems.
	p := r.params(op("op", []map[string]any{}))
	p["lease"] = map[string]any{"providerLeaseId": nil, "metadata": map[string]any{"remoteCwd": r.remote}}
	assert.Equal(t, "Daytona syncIn requires a provider lease ID.", r.h.call("environmentSyncIn", p, "").wait().Error["message"])
	assert.Equal(t, "Daytona syncOut requires a provider lease ID.", r.h.call("environmentSyncOut", p, "").wait().Error["message"])
	p["lease"] = map[string]any{"providerLeaseId": r.l.id, "metadata": map[string]any{"remoteCwd": "   "}}
	assert.Equal(t, "Daytona file sync requires a workspace remote dir on the lease metadata.", r.h.call("environmentSyncIn", p, "").wait().Error["message"])
	p = r.params(map[string]any{"operationId": "op"})
	rep := r.h.call("environmentSyncIn", p, "").wait()
	assert.Equal(t, float64(-32602), plain(rep.Error["code"]))
	assert.Contains(t, rep.Error["message"], "params.operations[0].files must be an array")
	p = r.params()
	p["operations"] = "nope"
	assert.Equal(t, float64(-32602), plain(r.h.call("environmentSyncOut", p, "").wait().Error["code"]))
	assert.Empty(t, r.journal())
	r.done()
}

// The plugin never interprets operationId: it echoes it in the result as it
// came, whatever its JSON type, and an absent one stays absent
// (JSON.stringify drops undefined).
func TestSyncEchoesOperationIDs(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	ops := []map[string]any{
		{"operationId": 5, "files": []map[string]any{}},
		{"operationId": map[string]any{"a": []any{1, "b"}}, "files": []map[string]any{}},
		{"operationId": nil, "files": []map[string]any{}},
		{"operationId": true, "files": []map[string]any{}},
		{"files": []map[string]any{}},
		{"operationId": "op", "files": []map[string]any{}},
	}
	want := []any{
		map[string]any{"operationId": float64(5), "filesTransferred": float64(0), "bytesTransferred": float64(0)},
		map[string]any{"operationId": map[string]any{"a": []any{float64(1), "b"}}, "filesTransferred": float64(0), "bytesTransferred": float64(0)},
		map[string]any{"operationId": nil, "filesTransferred": float64(0), "bytesTransferred": float64(0)},
		map[string]any{"operationId": true, "filesTransferred": float64(0), "bytesTransferred": float64(0)},
		map[string]any{"filesTransferred": float64(0), "bytesTransferred": float64(0)},
		opResult("op", 0, 0),
	}
	rep, _ := r.in(ops...)
	assert.Equal(t, want, r.ok(rep))
	rep, _ = r.out(ops...)
	assert.Equal(t, want, r.ok(rep))
	r.done()
}

// ---- incremental sync in ----

// A second sync of the same tree into a reused lease moves almost nothing
// and leaves the same tree; a changed file is sent; a change made in the
// sandbox is undone as a full sync would.
func TestSyncInIncrementalThroughTheWorker(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, `,"reuseLease":true`)
	for i := 0; i < 40; i++ {
		r.write(fmt.Sprintf("tree/d%d/f%d.txt", i%5, i), strings.Repeat(fmt.Sprintf("line %d\n", i), 2000), 0o644)
	}
	m := mapping(r.hostPath("tree"), r.rpath("tree"), "directory")
	first := r.ok(func() reply { rep, _ := r.in(op("op", []map[string]any{m})); return rep }())[0].(map[string]any)
	// The lease is released (the sandbox stops) and resumed for the next run.
	require.Nil(t, r.h.call("environmentReleaseLease", r.h.releaseParams(r.l, nil), "").wait().Error)
	rp := r.h.releaseParams(r.l, nil)
	rp["leaseMetadata"] = r.meta
	res := r.h.call("environmentResumeLease", rp, "").wait()
	require.Nil(t, res.Error, "%v", res.Error)
	require.Equal(t, r.l.id, plain(res.Result).(map[string]any)["providerLeaseId"], "%v", res.Result)
	second := r.ok(func() reply { rep, _ := r.in(op("op", []map[string]any{m})); return rep }())[0].(map[string]any)
	assert.Equal(t, first["filesTransferred"], second["filesTransferred"])
	assert.Less(t, second["bytesTransferred"].(float64), first["bytesTransferred"].(float64)/50,
		"first %v, second %v", first["bytesTransferred"], second["bytesTransferred"])

	r.write("tree/d1/f1.txt", "changed on the host", 0o600)
	r.sandboxWrite("tree/d2/f2.txt", "changed in the sandbox", 0o644)
	r.ok(func() reply { rep, _ := r.in(op("op", []map[string]any{m})); return rep }())
	assertFile(t, r.rpath("tree/d1/f1.txt"), "changed on the host", 0o600)
	assertFile(t, r.rpath("tree/d2/f2.txt"), strings.Repeat("line 2\n", 2000), 0o644)
	r.done()
}

// A restarted worker, and any number of leases, still sync incrementally:
// the record of a sync is kept in each sandbox, not in the worker. Leases
// are synced in turn by one worker, then each again, unchanged, by a new
// one; every second sync sends under 1% of the first.
func TestSyncInIncrementalAcrossRestartsAndManyLeases(t *testing.T) {
	t.Parallel()
	leases := 8
	if testutil.Long() {
		leases = 100
	}
	env := startEmulator(t, emulator.Options{StepDelay: emulator.Synchronous})
	src := filepath.Join(t.TempDir(), "tree")
	for i := 0; i < 30; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%d/f%d.txt", i%3, i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 1000)), 0o644))
	}
	// Host files as old as a finished checkout, so no entry is racy.
	old := time.Now().Add(-time.Hour)
	require.NoError(t, filepath.Walk(src, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	}))
	syncIn := func(h *host, l lease) map[string]any {
		t.Helper()
		rep := h.call("environmentSyncIn", syncBenchParams(l, "directory", src, filepath.Join(l.remoteCwd, "tree")), "").wait()
		require.Nil(t, rep.Error, "sync in: %v", rep.Error)
		return plain(rep.Result).(map[string]any)["operations"].([]any)[0].(map[string]any)
	}
	first := startHost(t, hostOptions{})
	cfg := leaseConfig(env, `,"reuseLease":true`)
	var ls []lease
	var firstBytes []float64
	for i := 0; i < leases; i++ {
		l := first.acquire(cfg)
		ls = append(ls, l)
		firstBytes = append(firstBytes, syncIn(first, l)["bytesTransferred"].(float64))
	}
	first.shutdown()

	second := startHost(t, hostOptions{})
	for i, l := range ls {
		res := syncIn(second, l)
		assert.Equal(t, float64(30), res["filesTransferred"], "lease %d", i)
		assert.Less(t, res["bytesTransferred"].(float64), firstBytes[i]/100, "lease %d: first sync %v bytes, second %v", i, firstBytes[i], res["bytesTransferred"])
	}
	finish(t, second, env, ls...)
}

// ---- the transcript ----

func TestSyncTranscript(t *testing.T) {
	t.Parallel()
	env := startEmulator(t, emulator.Options{StepDelay: emulator.Synchronous})
	dir := t.TempDir()
	vars := env.vars(map[string]string{"HOST_DIR": dir})
	vars["CFG"] = leaseConfig(env, "")
	hooks := map[string]func(scenario.Vars) error{
		"write-host-files": func(scenario.Vars) error {
			if err := os.MkdirAll(filepath.Join(dir, "tree/sub"), 0o755); err != nil {
				return err
			}
			for name, body := range map[string]string{"config.txt": "plain", "tree/a.txt": "alpha", "tree/sub/b.txt": "beta"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					return err
				}
			}
			return os.Symlink("a.txt", filepath.Join(dir, "tree/link"))
		},
		"check-sandbox-files": func(v scenario.Vars) error {
			var remote string
			if err := json.Unmarshal(v["REMOTE_CWD"], &remote); err != nil {
				return err
			}
			return checkFiles(map[string]string{
				filepath.Join(remote, "config.txt"): "plain", filepath.Join(remote, "tree/a.txt"): "alpha",
				filepath.Join(remote, "tree/sub/b.txt"): "beta", filepath.Join(remote, "tree/link"): "->a.txt",
			})
		},
		"check-host-files": func(scenario.Vars) error {
			return checkFiles(map[string]string{
				filepath.Join(dir, "back/config.txt"): "plain", filepath.Join(dir, "restored/a.txt"): "alpha",
				filepath.Join(dir, "restored/sub/b.txt"): "beta", filepath.Join(dir, "restored/link"): "->a.txt",
			})
		},
	}
	playTranscriptWithHooks(t, transcriptPath("sync-roundtrip"), vars, hooks, nil)
}

// checkFiles compares files (or "->target" symlinks) with what they hold.
func checkFiles(want map[string]string) error {
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		w := want[p]
		if target, ok := strings.CutPrefix(w, "->"); ok {
			got, err := os.Readlink(p)
			if err != nil || got != target {
				return fmt.Errorf("%s: want a link to %s, got %q (%v)", p, target, got, err)
			}
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != w {
			return fmt.Errorf("%s: want %q, got %q (%v)", p, w, b, err)
		}
	}
	return nil
}

// A post-upload command's own timeoutMs bounds it (whole seconds, at least
// one), ends the operation and skips the rest.
func TestSyncInPostUploadTimeout(t *testing.T) {
	t.Parallel()
	r := newSyncRig(t, "")
	cfg := r.write("config.txt", "plain", 0o644)
	slow := "sleep " + uniqueSleep(30)
	rep, _ := r.in(op("op", []map[string]any{mapping(cfg, r.rpath("config.txt"), "file")},
		map[string]any{"command": slow, "timeoutMs": 400}, map[string]any{"command": "touch after"}))
	msg := r.failed(rep)
	assert.Contains(t, msg, "timeout", msg)
	calls := r.executes(slow)
	require.Len(t, calls, 1)
	assert.Equal(t, 1, calls[0].Timeout, "timeoutMs 400 → 1 s")
	assert.Empty(t, r.executes("touch after"))
	assertNoProcessWith(t, strings.TrimPrefix(slow, "sleep "))
	r.done()
}
