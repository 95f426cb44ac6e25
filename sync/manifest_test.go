package sync

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// wire counts what a sync sends the sandbox (upload bodies, paths and
// commands) and what comes back (command output).
type wire struct {
	Sandbox
	sent, received atomic.Int64
}

func (w *wire) Execute(ctx context.Context, req daytona.ExecuteRequest) (*daytona.ExecuteResponse, error) {
	w.sent.Add(int64(len(req.Command)))
	res, err := w.Sandbox.Execute(ctx, req)
	if res != nil {
		w.received.Add(int64(len(res.Result)))
	}
	return res, err
}

func (w *wire) UploadFiles(ctx context.Context, files []daytona.Upload) ([]daytona.UploadResult, error) {
	counted := make([]daytona.Upload, len(files))
	for i, f := range files {
		w.sent.Add(int64(len(f.Path)))
		counted[i] = daytona.Upload{Path: f.Path, Reader: countingReader{f.Reader, &w.sent}}
	}
	return w.Sandbox.UploadFiles(ctx, counted)
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// syncCounted runs one sync in through a fresh Config (nothing carried
// over from an earlier sync, as after a worker restart) and returns what
// it sent.
func (e *env) syncCounted(t *testing.T, ops []Operation, opts ...func(*Config)) ([]Result, int64) {
	t.Helper()
	cfg := e.config()
	for _, o := range opts {
		o(&cfg)
	}
	w := &wire{Sandbox: e.tb}
	cfg.Sandbox = w
	res, err := In(context.Background(), cfg, ops)
	require.NoError(t, err)
	return res, w.sent.Load()
}

// writeRandom writes n incompressible bytes.
func writeRandom(t *testing.T, path string, n int, rng *rand.Rand) {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestManifestRoundTrip(t *testing.T) {
	t.Parallel()
	dir := Mapping{SourcePath: "/h/src", TargetPath: "/w/t", Kind: KindDirectory, Exclude: []string{"*.log"}}
	id := identityOf("sb-1", dir)
	sig := hostSig{dev: 1, ino: 2, size: 3, mtime: 4, ctime: 5, mode: 0o100644, kind: '0', nlink: 1}
	w := manifestWriter{identity: id}
	w.add("a.txt", entryState{host: sig, sandbox: "f 644 3 1.5 2.5 77\x00"})
	w.add("racy.txt", entryState{host: sig, racy: true, sum: 0xabc})
	w.add("unlisted", entryState{host: sig})
	w.add("bad\xffname", entryState{host: sig})
	w.add("l", entryState{host: sig, sandbox: "l 777 1 1.5 2.5 78\x00x"})
	written := "f 644 9 3.5 4.5 79 racy.txt\x00\x00" + "garbage without its link field"
	m := string(w.bytes()) + written

	got := parseManifest(m, id, false)
	assert.Equal(t, map[string]entryState{
		"a.txt":    {host: sig, sandbox: "f 644 3 1.5 2.5 77\x00"},
		"racy.txt": {host: sig, sandbox: "f 644 9 3.5 4.5 79\x00", racy: true, sum: 0xabc},
		"l":        {host: sig, sandbox: "l 777 1 1.5 2.5 78\x00x"},
	}, got, "a pending entry takes its sandbox side from the listing, or is left out")

	other := func(f func(*Mapping)) string { m := dir; f(&m); return identityOf("sb-1", m) }
	for name, bad := range map[string]struct {
		manifest, identity string
	}{
		"empty":            {"", id},
		"truncated":        {m[:len(m)/2], id},
		"a byte changed":   {strings.Replace(m, "a.txt", "b.txt", 1), id},
		"an older format":  {strings.Replace(m, manifestFormat, "paperclip-sync-manifest 0", 1), id},
		"another sandbox":  {m, identityOf("sb-2", dir)},
		"another target":   {m, other(func(m *Mapping) { m.TargetPath = "/w/u" })},
		"another source":   {m, other(func(m *Mapping) { m.SourcePath = "/h/other" })},
		"another exclude":  {m, other(func(m *Mapping) { m.Exclude = nil })},
		"following links":  {m, other(func(m *Mapping) { m.FollowSymlinks = true })},
		"another mode":     {m, other(func(m *Mapping) { m.Mode = testutil.Ptr(int64(0o555)) })},
		"a file's":         {m, other(func(m *Mapping) { m.Kind = KindFile })},
		"count too large":  {strings.Replace(m, "\x004 ", "\x009 ", 1), id},
		"not a manifest":   {"hello\x00world\x00", id},
		"binary garbage":   {"\xff\xfe\x00\x00\x00\x00", id},
		"negative count":   {strings.Replace(m, "\x004 ", "\x00-1 ", 1), id},
		"bad host sig":     {strings.Replace(m, "1 2 3 4 5", "1 2 x 4 5", 1), id},
		"header only, cut": {manifestFormat + "\x00" + id, id},
	} {
		assert.Nil(t, parseManifest(bad.manifest, bad.identity, false), name)
	}
}

func TestParseManifestRead(t *testing.T) {
	t.Parallel()
	listing := listingMarker + "\nf 644 1 1 1 1 a\x00\x00"
	dir, ms, rest, ok := parseManifestRead("noise"+manifestMarker+"\x00/home/u/.cache/x\x00"+"3\x00abc"+"0\x00"+listing, 2)
	require.True(t, ok)
	assert.Equal(t, "/home/u/.cache/x", dir)
	assert.Equal(t, []string{"abc", ""}, ms)
	assert.Equal(t, listing, rest)
	for name, out := range map[string]string{
		"no marker":             "PAPERCLIP\x00",
		"size larger than sent": manifestMarker + "\x00/d\x00" + "9\x00abc0\x00" + listing,
		"size smaller":          manifestMarker + "\x00/d\x00" + "2\x00abc0\x00" + listing,
		"relative folder":       manifestMarker + "\x00d\x00" + "0\x000\x00" + listing,
		"one manifest short":    manifestMarker + "\x00/d\x00" + "0\x00" + listing,
		"no listing after":      manifestMarker + "\x00/d\x00" + "0\x000\x00",
	} {
		_, ms, _, ok := parseManifestRead(out, 2)
		assert.False(t, ok, name)
		assert.Nil(t, ms, name)
	}
}

// After a restart (a fresh Config, nothing in memory) an unchanged tree and
// file are not sent again: the manifest in the sandbox vouches for them.
func TestIncrementalSyncSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const files, size = 100, 32 << 10
	for i := 0; i < files; i++ {
		writeRandom(t, filepath.Join(e.host, "src", fmt.Sprintf("d%d/f%03d.bin", i%7, i)), size, rng)
	}
	writeRandom(t, filepath.Join(e.host, "single.bin"), size, rng)
	ops := []Operation{{ID: "op", Files: []Mapping{
		{SourcePath: filepath.Join(e.host, "single.bin"), TargetPath: e.remote("single.bin"), Kind: KindFile, Mode: testutil.Ptr(int64(0o600))},
		{SourcePath: filepath.Join(e.host, "src"), TargetPath: e.remote("tree"), Kind: KindDirectory},
	}}}
	first, sent1 := e.syncCounted(t, ops)
	total := int64((files + 1) * size)
	require.Greater(t, sent1, total, "the first sync sends everything")
	second, sent2 := e.syncCounted(t, ops)
	assert.Less(t, sent2, total/100, "the second sync sends under 1%% (%d of %d bytes)", sent2, total)
	assert.Equal(t, first[0].FilesTransferred, second[0].FilesTransferred)
	// Again, whether or not the racy records settle (and are written anew).
	_, sent3 := e.syncCounted(t, ops)
	assert.Less(t, sent3, total/100)
	assert.Empty(t, e.scratchLeft())
}

// Many leases, each its own sandbox, synced in turn and then each again:
// the worker keeps nothing per lease, so the count does not matter. make
// test syncs eight (each moves a megabyte through the emulator, slow
// under the race detector); make test-long the full hundred.
func TestIncrementalSyncManyLeases(t *testing.T) {
	t.Parallel()
	leases := testutil.Seeds(8, 100)
	first := newEnv(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const files, size = 8, 128 << 10
	src := filepath.Join(first.host, "src")
	for i := 0; i < files; i++ {
		writeRandom(t, filepath.Join(src, fmt.Sprintf("f%d.bin", i)), size, rng)
	}
	envs := []*env{first}
	ctx := context.Background()
	for len(envs) < leases {
		sb, err := first.client.CreateAndWait(ctx, daytona.CreateParams{}, time.Minute)
		require.NoError(t, err)
		tb := first.client.Toolbox(sb)
		home, err := tb.WorkDir(ctx)
		require.NoError(t, err)
		remote := filepath.Join(home, "paperclip-workspace")
		require.NoError(t, tb.CreateFolder(ctx, remote, "755"))
		envs = append(envs, &env{t: t, emu: first.emu, client: first.client, tb: tb, sandboxID: sb.ID, remoteDir: remote, host: first.host, tracer: &recordingTracer{}})
	}
	opsFor := func(e *env) []Operation {
		return []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: e.remote("tree"), Kind: KindDirectory}}}}
	}
	for _, e := range envs {
		_, sent := e.syncCounted(t, opsFor(e))
		require.Greater(t, sent, int64(files*size))
	}
	for i, e := range envs {
		_, sent := e.syncCounted(t, opsFor(e))
		assert.Less(t, sent, int64(files*size/100), "lease %d: the second sync sends under 1%%", i)
	}
}

// Randomised: host and sandbox trees change between syncs in every way
// the record must notice; after each incremental sync (a fresh Config, as
// after a restart) the sandbox holds exactly what a full sync leaves in a
// twin target that had the same sandbox changes. DAYTONA_SYNC_SEED replays
// one seed; DAYTONA_SYNC_ROUNDS makes runs longer.
func TestIncrementalSyncRandomised(t *testing.T) {
	t.Parallel()
	seeds := []uint64{1, 2, 3}
	if v := os.Getenv("DAYTONA_SYNC_SEED"); v != "" {
		var s uint64
		_, err := fmt.Sscan(v, &s)
		require.NoError(t, err)
		seeds = []uint64{s}
	}
	rounds := 12
	if v := os.Getenv("DAYTONA_SYNC_ROUNDS"); v != "" {
		_, err := fmt.Sscan(v, &rounds)
		require.NoError(t, err)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			randomisedRun(t, seed, rounds)
		})
	}
}

func randomisedRun(t *testing.T, seed uint64, rounds int) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	m := &treeMutator{rng: rng}
	src := filepath.Join(e.host, "src")
	for i := 0; i < 30; i++ {
		d := filepath.Join(src, fmt.Sprintf("d%d", i%5), fmt.Sprintf("s%d", i%2))
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", i)), []byte(m.content()), 0o644))
	}
	require.NoError(t, os.Symlink("d0/s0/f0.txt", filepath.Join(src, "top-link")))
	single := e.write("single.txt", m.content(), 0o644)
	inc, full := e.remote("inc"), e.remote("full")
	opsFor := func(target string) []Operation {
		return []Operation{{ID: "op", Files: []Mapping{
			{SourcePath: single, TargetPath: target + "-single.txt", Kind: KindFile, Mode: testutil.Ptr(int64(0o640))},
			{SourcePath: src, TargetPath: target, Kind: KindDirectory, Exclude: []string{"*.log"}},
		}}}
	}
	snapshot := func(target string) map[string]string {
		s := fullSnapshot(t, target)
		b, err := os.ReadFile(target + "-single.txt")
		require.NoError(t, err)
		fi, err := os.Stat(target + "-single.txt")
		require.NoError(t, err)
		s["<single>"] = fi.Mode().String() + " " + string(b)
		return s
	}
	for round := 0; round < rounds; round++ {
		var changes []string
		if round > 0 {
			for i := rng.IntN(4); i > 0; i-- {
				changes = append(changes, m.mutateHost(t, src))
			}
			if rng.IntN(3) == 0 {
				changes = append(changes, m.mutateSingle(t, single))
			}
			for i := rng.IntN(4); i > 0; i-- {
				changes = append(changes, m.mutateSandboxMore(t, e, inc, full))
			}
		}
		cfg := e.config()
		if rng.IntN(3) == 0 {
			// A sync long after every change: records are not racy.
			cfg.RacyClock = later
		}
		fullCfg := e.config()
		fullCfg.SandboxID = ""
		rf, ferr := In(ctx, fullCfg, opsFor(full))
		ri, err := In(ctx, cfg, opsFor(inc))
		if ferr != nil {
			// What cannot be written over (a file onto a folder the
			// sandbox filled) fails both alike; the targets start afresh.
			require.EqualError(t, err, strings.ReplaceAll(ferr.Error(), full, inc), "round %d after %q", round, changes)
			for _, p := range []string{inc, full, inc + "-single.txt", full + "-single.txt"} {
				require.NoError(t, os.RemoveAll(p))
			}
			continue
		}
		require.NoError(t, err, "round %d after %q", round, changes)
		assert.Equal(t, rf[0].FilesTransferred, ri[0].FilesTransferred, "round %d", round)
		require.Equal(t, snapshot(full), snapshot(inc), "seed %d round %d after %q", seed, round, changes)
	}
	// Unchanged: the first sync once the last changes are no longer racy
	// may rewrite the manifest to settle their records (how long after them
	// it runs depends on the machine's load); the next sends next to nothing.
	settled := func(c *Config) { c.RacyClock = later }
	e.syncCounted(t, opsFor(inc), settled)
	_, sent := e.syncCounted(t, opsFor(inc), settled)
	assert.Less(t, sent, int64(4096))
	assert.Empty(t, e.scratchLeft())
}

// mutateSingle changes the source of the file mapping.
func (m *treeMutator) mutateSingle(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	switch m.rng.IntN(3) {
	case 0: // same size, same mtime
		for i := range b {
			b[i] = 'a' + byte(m.rng.IntN(26))
		}
		require.NoError(t, os.WriteFile(path, b, 0o644))
		require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
		return "single: rewrite in place"
	case 1:
		require.NoError(t, os.WriteFile(path, append(b, m.content()...), 0o644))
		return "single: grow"
	default:
		require.NoError(t, os.WriteFile(path, b[:len(b)/2], 0o644))
		return "single: truncate"
	}
}

// mutateSandboxMore applies one change to the same path of both sandbox
// trees (and the file mapping's targets beside them): by the test's hand
// or by a command run in the sandbox.
func (m *treeMutator) mutateSandboxMore(t *testing.T, e *env, roots ...string) string {
	t.Helper()
	dirs, files := entriesOf(t, roots[0])
	files = append(files, "../"+filepath.Base(roots[0])+"-single.txt")
	rel := files[m.rng.IntN(len(files))]
	kind := m.rng.IntN(10)
	content := m.content()
	if kind == 9 && len(dirs) > 0 {
		rel = dirs[m.rng.IntN(len(dirs))]
	}
	for _, root := range roots {
		f := filepath.Join(root, rel)
		if strings.HasPrefix(rel, "../") {
			f = root + "-single.txt"
		}
		fi, err := os.Lstat(f)
		if err != nil {
			continue
		}
		regular := fi.Mode().IsRegular()
		switch kind {
		case 0: // same size, mtime put back
			if regular {
				b, _ := os.ReadFile(f)
				require.NoError(t, os.WriteFile(f, bytes.Repeat([]byte{'Z'}, len(b)), fi.Mode().Perm()))
				require.NoError(t, os.Chtimes(f, fi.ModTime(), fi.ModTime()))
			}
		case 1: // growth
			if regular {
				af, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = af.WriteString(content)
				require.NoError(t, err)
				require.NoError(t, af.Close())
			}
		case 2: // truncation
			if regular {
				require.NoError(t, os.Truncate(f, fi.Size()/2))
			}
		case 3:
			if regular {
				require.NoError(t, os.Chmod(f, 0o666))
			}
		case 4:
			require.NoError(t, os.RemoveAll(f))
		case 5: // a symlink in its place
			require.NoError(t, os.RemoveAll(f))
			require.NoError(t, os.Symlink("elsewhere", f))
		case 6: // a folder in its place
			require.NoError(t, os.RemoveAll(f))
			require.NoError(t, os.MkdirAll(filepath.Join(f, "inner"), 0o755))
		case 7, 8: // a command in the sandbox: append, or rewrite same size
			cmd := "printf %s " + shellQuote(content) + " >> " + shellQuote(f)
			if kind == 8 {
				cmd = "sed -i 's/[0-9]/x/' " + shellQuote(f) + " 2>/dev/null; true"
			}
			res, err := e.tb.Execute(context.Background(), daytona.ExecuteRequest{Command: cmd, Timeout: 30 * time.Second})
			require.NoError(t, err)
			require.Zero(t, res.ExitCode, res.Result)
		case 9: // a folder replaced by a file
			if fi.IsDir() {
				require.NoError(t, os.RemoveAll(f))
				require.NoError(t, os.WriteFile(f, []byte(content), 0o644))
			}
		}
	}
	sameTimes(t, roots[0], roots[1:]...)
	for _, twin := range roots[1:] {
		sameTimes(t, roots[0]+"-single.txt", twin+"-single.txt")
	}
	return fmt.Sprintf("sandbox %d %s", kind, rel)
}

// The manifest lives outside the workspace: a sync out of the whole
// workspace, and a listing of it, show only what was synced.
func TestSyncInManifestStaysOutOfTheWorkspace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("src/a.txt", "a", 0o644)
	f := e.write("f.txt", "f", 0o644)
	ops := []Operation{{ID: "op", Files: []Mapping{
		{SourcePath: f, TargetPath: e.remote("f.txt"), Kind: KindFile},
		{SourcePath: filepath.Join(e.host, "src"), TargetPath: e.remoteDir, Kind: KindDirectory},
	}}}
	for i := 0; i < 2; i++ {
		_, err := In(context.Background(), e.config(), ops)
		require.NoError(t, err)
	}
	require.FileExists(t, e.manifestPath(e.remoteDir))
	require.FileExists(t, e.manifestPath(e.remote("f.txt")))
	var listed []string
	require.NoError(t, filepath.Walk(e.remoteDir, func(p string, _ os.FileInfo, err error) error {
		listed = append(listed, strings.TrimPrefix(p, e.remoteDir))
		return err
	}))
	assert.Equal(t, []string{"", "/a.txt", "/f.txt"}, listed)

	out := filepath.Join(e.host, "out")
	_, err := Out(context.Background(), e.config(), []Operation{{ID: "op", Files: []Mapping{
		{SourcePath: e.remoteDir, TargetPath: out, Kind: KindDirectory},
	}}})
	require.NoError(t, err)
	got, _ := entriesOf(t, out)
	_, files := entriesOf(t, out)
	assert.Empty(t, got)
	assert.Equal(t, []string{"a.txt", "f.txt"}, files)
}

// A workspace that holds the home (and so where the manifests would go)
// gets no manifest at all, and every sync is a full one.
func TestSyncInNoManifestInsideTheWorkspace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("src/a.txt", strings.Repeat("a", 1000), 0o644)
	cfg := e.config()
	cfg.RemoteDir = filepath.Dir(e.remoteDir) // the home
	ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: filepath.Join(e.host, "src"), TargetPath: e.remote("t"), Kind: KindDirectory}}}}
	var sent []int64
	for i := 0; i < 2; i++ {
		w := &wire{Sandbox: e.tb}
		cfg.Sandbox = w
		_, err := In(context.Background(), cfg, ops)
		require.NoError(t, err)
		sent = append(sent, w.sent.Load())
	}
	assert.NoDirExists(t, filepath.Join(cfg.RemoteDir, ".cache"))
	assert.InDelta(t, sent[0], sent[1], 64, "both syncs are full ones")
}

// A manifest that is missing, damaged, of another format or of another
// sandbox or target makes a full sync, never an error; the next sync is
// incremental again.
func TestSyncInBadManifestMeansFullSync(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		spoil func(t *testing.T, e *env, path string)
	}{
		{"missing", func(t *testing.T, _ *env, p string) { require.NoError(t, os.Remove(p)) }},
		{"empty", func(t *testing.T, _ *env, p string) { require.NoError(t, os.WriteFile(p, nil, 0o644)) }},
		{"truncated", func(t *testing.T, _ *env, p string) {
			fi, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, fi.Size()/2))
		}},
		{"garbage", func(t *testing.T, _ *env, p string) {
			require.NoError(t, os.WriteFile(p, []byte("\x00\x00not a manifest\x00\xff"), 0o644))
		}},
		{"an older format", func(t *testing.T, _ *env, p string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, bytes.Replace(b, []byte(manifestFormat), []byte("paperclip-sync-manifest 0"), 1), 0o644))
		}},
		{"another sandbox's", func(t *testing.T, e *env, p string) {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, bytes.ReplaceAll(b, []byte(e.sandboxID), []byte("another-sandbox")), 0o644))
		}},
		{"another target's", func(t *testing.T, e *env, p string) {
			b, err := os.ReadFile(e.manifestPath(e.remote("other")))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}},
		{"a folder", func(t *testing.T, _ *env, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o755))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			rng := rand.New(rand.NewPCG(5, 6))
			for i := 0; i < 10; i++ {
				writeRandom(t, filepath.Join(e.host, "src", fmt.Sprintf("f%d", i)), 4096, rng)
			}
			ops := func(target string) []Operation {
				return []Operation{{ID: "op", Files: []Mapping{{SourcePath: filepath.Join(e.host, "src"), TargetPath: e.remote(target), Kind: KindDirectory}}}}
			}
			e.syncCounted(t, ops("other"))
			first, sent1 := e.syncCounted(t, ops("t"))
			tt.spoil(t, e, e.manifestPath(e.remote("t")))
			// What the full sync must restore.
			require.NoError(t, os.WriteFile(e.remote("t/f3"), []byte("changed in the sandbox"), 0o644))
			second, sent2 := e.syncCounted(t, ops("t"))
			assert.Equal(t, first, second)
			assert.InDelta(t, sent1, sent2, float64(sent1)/10, "a full sync")
			assert.Equal(t, fullSnapshot(t, e.remote("other")), fullSnapshot(t, e.remote("t")))
			if tt.name != "a folder" {
				// As in the randomised test: the first sync once the files
				// are no longer racy may rewrite the manifest to settle
				// their records (when it runs depends on the machine's
				// load); the next is incremental.
				settled := func(c *Config) { c.RacyClock = later }
				e.syncCounted(t, ops("t"), settled)
				_, sent3 := e.syncCounted(t, ops("t"), settled)
				assert.Less(t, sent3, sent1/10, "incremental again")
			}
		})
	}
}

// A temp a sync left in the manifest folder goes once it is a day old.
func TestSyncInSweepsOldManifestTemps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("src/a.txt", "a", 0o644)
	ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: filepath.Join(e.host, "src"), TargetPath: e.remote("t"), Kind: KindDirectory}}}}
	e.syncCounted(t, ops)
	dir := filepath.Dir(e.manifestPath(e.remote("t")))
	old, recent := filepath.Join(dir, scratchPrefix+"-old.tar.gz.manifest"), filepath.Join(dir, scratchPrefix+"-recent.tar.gz.manifest")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	require.NoError(t, os.WriteFile(recent, nil, 0o644))
	require.NoError(t, os.Chtimes(old, time.Now().Add(-25*time.Hour), time.Now().Add(-25*time.Hour)))
	e.syncCounted(t, ops)
	assert.NoFileExists(t, old)
	assert.FileExists(t, recent)
	assert.FileExists(t, e.manifestPath(e.remote("t")))
}
