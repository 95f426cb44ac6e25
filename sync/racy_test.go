package sync

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Clocks for RacyClock: epoch puts every host file after the sync's start
// (all racy); later puts the sync an hour after them (none racy).
func epoch() time.Time { return time.Unix(0, 0) }
func later() time.Time { return time.Now().Add(time.Hour) }

func TestRacySignatures(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	since := racySince(start)
	at := func(d time.Duration) int64 { return start.Add(d).UnixNano() }
	for _, tt := range []struct {
		name         string
		mtime, ctime int64
		racy         bool
	}{
		{"changed long before", at(-time.Hour), at(-time.Hour), false},
		{"just outside the margin", at(-racyMargin - 1), at(-racyMargin - 1), false},
		{"at the margin", at(-time.Hour), at(-racyMargin), true},
		{"changed during the sync", at(-time.Hour), at(time.Millisecond), true},
		{"ctime in the future", at(-time.Hour), at(time.Hour), true},
		{"mtime set into the future", at(time.Hour), at(-time.Hour), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.racy, hostSig{mtime: tt.mtime, ctime: tt.ctime}.racy(since))
		})
	}
}

// The record's decision alone, fed signatures and digests directly: an
// identical signature with different content (what a coarse-timestamp
// rewrite leaves) is trusted only when the record is not racy.
func TestEntryUnchanged(t *testing.T) {
	t.Parallel()
	sig := hostSig{dev: 1, ino: 2, size: 5, mtime: 10, ctime: 11, mode: 0o100644, kind: tar.TypeReg, nlink: 1}
	other := sig
	other.ctime++
	sums := func(v uint64, err error) func() (uint64, error) { return func() (uint64, error) { return v, err } }
	for _, tt := range []struct {
		name      string
		rec       entryState
		host      hostSig
		sandbox   string
		sum       func() (uint64, error)
		unchanged bool
		digested  bool
	}{
		{"plain, both sides as recorded", entryState{host: sig, sandbox: "s"}, sig, "s", sums(9, nil), true, false},
		{"plain, same signature, other content: trusted", entryState{host: sig, sandbox: "s"}, sig, "s", sums(9, nil), true, false},
		{"plain, host changed", entryState{host: sig, sandbox: "s"}, other, "s", sums(7, nil), false, false},
		{"plain, sandbox changed", entryState{host: sig, sandbox: "s"}, sig, "t", sums(7, nil), false, false},
		{"plain, sandbox never listed", entryState{host: sig}, sig, "", sums(7, nil), false, false},
		{"racy, same content", entryState{host: sig, sandbox: "s", racy: true, sum: 7}, sig, "s", sums(7, nil), true, true},
		{"racy, same signature, other content", entryState{host: sig, sandbox: "s", racy: true, sum: 7}, sig, "s", sums(8, nil), false, true},
		{"racy, unreadable", entryState{host: sig, sandbox: "s", racy: true, sum: 7}, sig, "s", sums(7, errors.New("EACCES")), false, true},
		{"racy, host changed: no read", entryState{host: sig, sandbox: "s", racy: true, sum: 7}, other, "s", sums(7, nil), false, false},
		{"racy, sandbox changed: no read", entryState{host: sig, sandbox: "s", racy: true, sum: 7}, sig, "t", sums(7, nil), false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			digested := false
			got := tt.rec.unchanged(tt.host, tt.sandbox, func() (uint64, error) { digested = true; return tt.sum() })
			assert.Equal(t, tt.unchanged, got)
			assert.Equal(t, tt.digested, digested, "digest read")
		})
	}
}

func TestEntrySettled(t *testing.T) {
	t.Parallel()
	since := racySince(time.Unix(1_700_000_000, 0))
	old := hostSig{mtime: since - 1, ctime: since - 1}
	recent := hostSig{mtime: since - 1, ctime: since}
	for _, tt := range []struct {
		name string
		in   entryState
		want entryState
	}{
		{"plain stays plain", entryState{host: old, sandbox: "s"}, entryState{host: old, sandbox: "s"}},
		{"racy, now old: plain", entryState{host: old, sandbox: "s", racy: true, sum: 7}, entryState{host: old, sandbox: "s"}},
		{"racy, still recent: kept", entryState{host: recent, sandbox: "s", racy: true, sum: 7}, entryState{host: recent, sandbox: "s", racy: true, sum: 7}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.in.settled(since))
		})
	}
}

// A real coarse-timestamp rewrite, as far as user space can make one: the
// same size, the mtime put back, and the ctime (which cannot be set) taken
// as recorded. The signature then matches; the digest does not.
func TestCoarseRewriteIsCaughtByTheDigest(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, []byte("old content"), 0o644))
	sigNow := func() hostSig {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(p, &st))
		return sigOf(&st, tar.TypeReg, true)
	}
	recorded := sigNow()
	sum, err := contentSum(p, true)
	require.NoError(t, err)
	rec := entryState{host: recorded, sandbox: "s", racy: true, sum: sum}
	assert.True(t, rec.unchanged(sigNow(), "s", func() (uint64, error) { return contentSum(p, true) }))

	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, []byte("new content"), 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	now := sigNow()
	now.ctime = recorded.ctime // what a coarse clock would have left
	require.Equal(t, recorded, now)
	assert.False(t, rec.unchanged(now, "s", func() (uint64, error) { return contentSum(p, true) }))
	rec.racy = false
	assert.True(t, rec.unchanged(now, "s", nil), "a plain record trusts the signature")
}

// forgeHostSig makes a recorded entry's host signature what the host file
// has now, as a rewrite within one coarse timestamp granule would have left
// it (this kernel's fine-grained ctime cannot show that): the manifest in
// the sandbox is rewritten. rel "" is a file mapping's target.
func forgeHostSig(t *testing.T, e *env, m Mapping, rel, path string, kind byte, follow bool) {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Lstat(path, &st))
	if rel == "" {
		rel = m.TargetPath
	}
	records := e.manifestOf(m)
	rec, ok := records[rel]
	require.True(t, ok, "recorded %s", rel)
	rec.host = sigOf(&st, kind, follow)
	records[rel] = rec
	w := manifestWriter{identity: identityOf(e.sandboxID, m)}
	for k, v := range records {
		w.add(k, v)
	}
	require.NoError(t, os.WriteFile(e.manifestPath(m.TargetPath), w.bytes(), 0o644))
}

func racyEntries(e *env, m Mapping) (n int) {
	for _, st := range e.manifestOf(m) {
		if st.racy {
			n++
		}
	}
	return n
}

// Through the real sync path: a same-size rewrite whose signature stayed
// the same is still sent when the first sync found the file racy, and an
// unchanged racy file costs a local read, not a send. Entries not racy keep
// trusting their signature (the forged one hides the rewrite there, which
// is why racy entries need the digest).
func TestSyncInRacyTree(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		clock   func() time.Time
		rewrite bool
		racy    int // racy records after the first sync
		want    string
	}{
		{"racy, rewritten in the granule", epoch, true, 3, "NEW CONTENT"},
		{"racy, unchanged", epoch, false, 3, "old content"},
		{"not racy, unchanged", later, false, 0, "old content"},
		{"not racy, signature forged", later, true, 0, "old content"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			src := filepath.Join(e.host, "src")
			a := e.write("src/d/a.txt", "old content", 0o644)
			e.write("src/b.txt", strings.Repeat("b", 4096), 0o644)
			require.NoError(t, os.Symlink("d/a.txt", filepath.Join(src, "link")))
			target := e.remote("proj")
			cfg := e.config()
			cfg.RacyClock, cfg.Local = tt.clock, true
			ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: target, Kind: KindDirectory}}}}
			first, err := In(context.Background(), cfg, ops)
			require.NoError(t, err)
			// Racy: the two files and the symlink, not the folders.
			assert.Equal(t, tt.racy, racyEntries(e, ops[0].Files[0]))

			if tt.rewrite {
				fi, err := os.Stat(a)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(a, []byte("NEW CONTENT"), 0o644))
				require.NoError(t, os.Chtimes(a, fi.ModTime(), fi.ModTime()))
				forgeHostSig(t, e, ops[0].Files[0], "d/a.txt", a, tar.TypeReg, false)
			}
			second, err := In(context.Background(), cfg, ops)
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(target, "d/a.txt"))
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))
			if tt.want == "NEW CONTENT" {
				// Small archives are compressed even when Local.
				assert.Greater(t, second[0].BytesTransferred, int64(100), "a.txt and its folder are sent")
			} else {
				assert.Less(t, second[0].BytesTransferred, int64(100), "nothing is sent (%d the first time)", first[0].BytesTransferred)
			}
			assert.Empty(t, e.scratchLeft())
		})
	}
}

// The same bytes go out whether or not entries are racy (the digest is
// taken beside the archive, not in it), and a racy entry verified by a sync
// that starts well after its change is trusted by its signature again.
func TestSyncInRacyTreeSendsTheSameBytes(t *testing.T) {
	t.Parallel()
	bytesSent := func(clock func() time.Time) (first, second int64, racy int) {
		e := newEnv(t)
		src := filepath.Join(e.host, "src")
		for i := 0; i < 20; i++ {
			e.write(filepath.Join("src", string(rune('a'+i%4)), string(rune('a'+i))+".txt"), strings.Repeat("x", 1000*i), 0o644)
		}
		// Fixed times and owner-free names make the two archives comparable.
		require.NoError(t, filepath.Walk(src, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Chtimes(p, time.Unix(1e9, 0), time.Unix(1e9, 0))
		}))
		cfg := e.config()
		cfg.RacyClock, cfg.Local = clock, true
		ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: e.remote("proj"), Kind: KindDirectory}}}}
		r1, err := In(context.Background(), cfg, ops)
		require.NoError(t, err)
		r2, err := In(context.Background(), cfg, ops)
		require.NoError(t, err)
		return r1[0].BytesTransferred, r2[0].BytesTransferred, racyEntries(e, ops[0].Files[0])
	}
	f1, s1, racy1 := bytesSent(epoch)
	f2, s2, racy2 := bytesSent(later)
	assert.Equal(t, f2, f1)
	assert.Equal(t, s2, s1)
	assert.Equal(t, 20, racy1)
	assert.Zero(t, racy2)

	// Racy at the first sync, verified and settled at the second.
	e := newEnv(t)
	src := filepath.Join(e.host, "src")
	e.write("src/a.txt", "content", 0o644)
	cfg := e.config()
	cfg.RacyClock = epoch
	ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: e.remote("proj"), Kind: KindDirectory}}}}
	_, err := In(context.Background(), cfg, ops)
	require.NoError(t, err)
	assert.Equal(t, 1, racyEntries(e, ops[0].Files[0]))
	cfg.RacyClock = later
	res, err := In(context.Background(), cfg, ops)
	require.NoError(t, err)
	assert.Less(t, res[0].BytesTransferred, int64(100))
	assert.Zero(t, racyEntries(e, ops[0].Files[0]))
}

// File mappings: the same rules through the batch upload.
func TestSyncInRacyFileMapping(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		clock   func() time.Time
		rewrite bool
		racy    bool
		uploads int // after both syncs
		want    string
	}{
		{"racy, rewritten in the granule", epoch, true, true, 2, "NEW CONTENT"},
		{"racy, unchanged", epoch, false, true, 1, "old content"},
		{"not racy, unchanged", later, false, false, 1, "old content"},
		{"not racy, signature forged", later, true, false, 1, "old content"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			src := e.write("f.txt", "old content", 0o644)
			target := e.remote("f.txt")
			cfg := e.config()
			cfg.RacyClock = tt.clock
			ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: target, Kind: KindFile}}}}
			_, err := In(context.Background(), cfg, ops)
			require.NoError(t, err)
			f, ok := e.manifestOf(ops[0].Files[0])[target]
			require.True(t, ok)
			assert.Equal(t, tt.racy, f.racy)
			if tt.rewrite {
				fi, err := os.Stat(src)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(src, []byte("NEW CONTENT"), 0o644))
				require.NoError(t, os.Chtimes(src, fi.ModTime(), fi.ModTime()))
				forgeHostSig(t, e, ops[0].Files[0], "", src, '0', true)
			}
			_, err = In(context.Background(), cfg, ops)
			require.NoError(t, err)
			uploads := 0
			for _, c := range e.emu.Server.Journal(e.sandboxID) {
				if c.Route == "bulk-upload" {
					uploads += len(workspacePaths(e, c.Paths))
				}
			}
			assert.Equal(t, tt.uploads, uploads)
			b, err := os.ReadFile(target)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))
			assert.Empty(t, e.scratchLeft())
		})
	}
}
