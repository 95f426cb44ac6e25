package sync

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// fullSnapshot describes a tree for comparing an incremental sync with a
// full one: every entry's type, mode, content or link target, mtime (the
// root's aside: tar never names it) and the names it shares an inode with.
func fullSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	inodes := map[uint64][]string{}
	require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%s %s", fi.Mode().String(), fi.ModTime().UTC().Format(time.RFC3339))
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			desc += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
			inodes[st.Ino] = append(inodes[st.Ino], rel)
		}
		out[rel] = desc
		return nil
	}))
	for _, names := range inodes {
		if len(names) > 1 {
			sort.Strings(names)
			for _, n := range names {
				out[n] += " linked:" + strings.Join(names, ",")
			}
		}
	}
	return out
}

// treeMutator changes a tree at random, the same way in two trees.
type treeMutator struct {
	rng *rand.Rand
	n   int
}

func (m *treeMutator) content() string {
	m.n++
	return strings.Repeat(fmt.Sprintf("%d-%x ", m.n, m.rng.Uint32()), 1+m.rng.IntN(40))
}

// entries lists a tree's paths (relative), folders and files apart.
func entriesOf(t *testing.T, root string) (dirs, files []string) {
	t.Helper()
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if fi.IsDir() {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(dirs)
	sort.Strings(files)
	return dirs, files
}

// mutateHost applies one random change to the host tree.
func (m *treeMutator) mutateHost(t *testing.T, root string) string {
	t.Helper()
	dirs, files := entriesOf(t, root)
	dirs = append(dirs, ".")
	pick := func(list []string) string { return list[m.rng.IntN(len(list))] }
	switch k := m.rng.IntN(11); {
	case k == 0 && len(files) > 0: // same size, same mtime, new bytes: only the ctime tells
		f := filepath.Join(root, pick(files))
		fi, err := os.Lstat(f)
		if err != nil || !fi.Mode().IsRegular() {
			return "skip"
		}
		b, _ := os.ReadFile(f)
		for i := range b {
			b[i] = 'A' + byte(m.rng.IntN(26))
		}
		require.NoError(t, os.WriteFile(f, b, fi.Mode().Perm()))
		require.NoError(t, os.Chtimes(f, fi.ModTime(), fi.ModTime()))
		return "rewrite in place " + f
	case k == 1 && len(files) > 0:
		f := filepath.Join(root, pick(files))
		if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
			require.NoError(t, os.Chmod(f, []os.FileMode{0o600, 0o644, 0o755, 0o640}[m.rng.IntN(4)]))
		}
		return "chmod " + f
	case k == 2 && len(files) > 0:
		f := filepath.Join(root, pick(files))
		require.NoError(t, os.Remove(f))
		return "delete " + f
	case k == 3:
		f := filepath.Join(root, pick(dirs), fmt.Sprintf("new%d.txt", m.rng.IntN(1000)))
		_ = os.WriteFile(f, []byte(m.content()), 0o644)
		return "add " + f
	case k == 4:
		d := filepath.Join(root, pick(dirs), fmt.Sprintf("dir%d", m.rng.IntN(1000)))
		_ = os.MkdirAll(filepath.Join(d, "inner"), 0o755)
		_ = os.WriteFile(filepath.Join(d, "inner", "f.log"), []byte(m.content()), 0o644)
		return "mkdir " + d
	case k == 5 && len(files) > 0: // a file becomes a folder
		f := filepath.Join(root, pick(files))
		require.NoError(t, os.Remove(f))
		require.NoError(t, os.MkdirAll(f, 0o750))
		_ = os.WriteFile(filepath.Join(f, "x"), []byte(m.content()), 0o644)
		return "file to dir " + f
	case k == 6 && len(files) > 0: // a symlink, in the tree or dangling
		f := filepath.Join(root, pick(files))
		target := []string{"../" + filepath.Base(f), "nowhere", filepath.Base(pick(files))}[m.rng.IntN(3)]
		_ = os.Remove(f)
		require.NoError(t, os.Symlink(target, f))
		return "symlink " + f
	case k == 7 && len(files) > 1: // a hard link
		a, b := filepath.Join(root, pick(files)), filepath.Join(root, pick(dirs), fmt.Sprintf("hard%d", m.rng.IntN(1000)))
		if fi, err := os.Lstat(a); err == nil && fi.Mode().IsRegular() {
			_ = os.Link(a, b)
		}
		return "hardlink " + b
	case k == 8 && len(dirs) > 1: // a folder's mode
		d := filepath.Join(root, pick(dirs[:len(dirs)-1]))
		require.NoError(t, os.Chmod(d, []os.FileMode{0o700, 0o755, 0o750}[m.rng.IntN(3)]))
		return "chmod dir " + d
	case k == 9 && len(dirs) > 1:
		d := filepath.Join(root, pick(dirs[:len(dirs)-1]))
		require.NoError(t, os.RemoveAll(d))
		return "rm -r " + d
	case k == 10 && len(files) > 0: // new content, new size
		f := filepath.Join(root, pick(files))
		if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() {
			require.NoError(t, os.WriteFile(f, []byte(m.content()), fi.Mode().Perm()))
		}
		return "rewrite " + f
	}
	return "nothing"
}

// mutateSandbox applies one random change (what an agent might do) to the
// same path in both sandbox trees.
func (m *treeMutator) mutateSandbox(t *testing.T, roots ...string) string {
	t.Helper()
	_, files := entriesOf(t, roots[0])
	if len(files) == 0 {
		return "nothing"
	}
	rel := files[m.rng.IntN(len(files))]
	kind := m.rng.IntN(4)
	content := m.content()
	for _, root := range roots {
		f := filepath.Join(root, rel)
		fi, err := os.Lstat(f)
		if err != nil {
			continue
		}
		switch kind {
		case 0:
			if fi.Mode().IsRegular() {
				require.NoError(t, os.WriteFile(f, []byte(content), fi.Mode().Perm()))
				require.NoError(t, os.Chtimes(f, fi.ModTime(), fi.ModTime()))
			}
		case 1:
			require.NoError(t, os.Remove(f))
		case 2:
			if fi.Mode().IsRegular() {
				require.NoError(t, os.Chmod(f, 0o666))
			}
		case 3:
			require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(f), "agent-extra.txt"), []byte(content), 0o644))
		}
	}
	sameTimes(t, roots[0], roots[1:]...)
	return fmt.Sprintf("sandbox %d %s", kind, rel)
}

// sameTimes gives every entry of each twin the mtime of the entry of root
// at its path (where both are of one type). A sandbox change is made in the
// twins one after the other, so the times it stamps may straddle a second;
// the twins were equal before it, so this puts back only what it stamped.
// (Writing a time changes the twin's ctime, which a full sync ignores.)
func sameTimes(t *testing.T, root string, twins ...string) {
	t.Helper()
	require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			if p == root && os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for _, twin := range twins {
			q := filepath.Join(twin, rel)
			if tf, err := os.Lstat(q); err != nil || tf.Mode().Type() != fi.Mode().Type() {
				continue
			}
			ts := []unix.Timespec{unix.NsecToTimespec(fi.ModTime().UnixNano()), unix.NsecToTimespec(fi.ModTime().UnixNano())}
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, q, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
		return nil
	}))
}

// An incremental sync (with a manifest) leaves exactly what a full sync
// leaves, round after round of random changes on both sides; with nothing
// changed it moves almost nothing.
func TestIncrementalSyncMatchesFullSync(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	e := newEnv(t)
	ctx := context.Background()
	m := &treeMutator{rng: rand.New(rand.NewPCG(seed, seed>>7))}
	src := filepath.Join(e.host, "src")
	for i := 0; i < 40; i++ {
		d := filepath.Join(src, fmt.Sprintf("d%d", i%6), fmt.Sprintf("s%d", i%3))
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", i)), []byte(m.content()), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(src, "skip.log"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("d0/s0/f0.txt", filepath.Join(src, "top-link")))
	require.NoError(t, os.Link(filepath.Join(src, "d1/s1/f1.txt"), filepath.Join(src, "d2/hard")))

	inc, full := e.remote("inc"), e.remote("full")
	sync := func(target string, incremental bool) Result {
		cfg := e.config()
		if !incremental {
			cfg.SandboxID = ""
		}
		res, err := In(ctx, cfg, []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: target, Kind: KindDirectory, Exclude: []string{"*.log"}}}}})
		require.NoError(t, err)
		return res[0]
	}
	for round := 0; round < 8; round++ {
		var changes []string
		if round > 0 {
			for i := m.rng.IntN(4); i > 0; i-- {
				changes = append(changes, m.mutateHost(t, src))
			}
			for i := m.rng.IntN(3); i > 0; i-- {
				changes = append(changes, m.mutateSandbox(t, inc, full))
			}
		}
		ri := sync(inc, true)
		rf := sync(full, false)
		assert.Equal(t, rf.FilesTransferred, ri.FilesTransferred, "round %d", round)
		require.Equal(t, fullSnapshot(t, full), fullSnapshot(t, inc), "round %d after %q", round, changes)
		if round > 0 && len(changes) == 0 {
			assert.Less(t, ri.BytesTransferred, rf.BytesTransferred/4, "round %d: nothing changed, little is sent", round)
		}
	}
	// Nothing changed at all: the second sync moves close to nothing.
	before := sync(inc, true)
	again := sync(inc, true)
	assert.Less(t, again.BytesTransferred, int64(100), "an unchanged tree sends an empty archive (%d bytes before)", before.BytesTransferred)
	assert.Greater(t, len(e.manifestOf(Mapping{SourcePath: src, TargetPath: inc, Kind: KindDirectory, Exclude: []string{"*.log"}})), 10)
	_, err := os.Stat(e.manifestPath(full))
	assert.ErrorIs(t, err, os.ErrNotExist, "a full sync writes no manifest")
}

// File mappings: an unchanged file already in place is not uploaded again;
// a change on either side is.
func TestIncrementalFileMappings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	src := e.write("big.bin", strings.Repeat("x", 1<<16), 0o644)
	ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: e.remote("big.bin"), Kind: KindFile, Mode: testutil.Ptr(int64(0o640))}}}}
	uploads := func() int {
		n := 0
		for _, c := range e.emu.Server.Journal(e.sandboxID) {
			if c.Route == "bulk-upload" {
				n += len(workspacePaths(e, c.Paths))
			}
		}
		return n
	}
	for i, step := range []struct {
		change  func()
		uploads int
		content string
		mode    os.FileMode
	}{
		{nil, 1, strings.Repeat("x", 1<<16), 0o640},
		{func() {}, 1, strings.Repeat("x", 1<<16), 0o640},
		{func() { e.write("big.bin", strings.Repeat("y", 1<<16), 0o644) }, 2, strings.Repeat("y", 1<<16), 0o640},
		{func() { require.NoError(t, os.WriteFile(e.remote("big.bin"), []byte("agent"), 0o640)) }, 3, strings.Repeat("y", 1<<16), 0o640},
		{func() { require.NoError(t, os.Chmod(e.remote("big.bin"), 0o777)) }, 4, strings.Repeat("y", 1<<16), 0o640},
		{func() { ops[0].Files[0].Mode = testutil.Ptr(int64(0o600)) }, 5, strings.Repeat("y", 1<<16), 0o600},
	} {
		if step.change != nil {
			step.change()
		}
		res, err := In(ctx, cfg, ops)
		require.NoError(t, err)
		assert.Equal(t, []Result{{OperationID: "op", FilesTransferred: 1, BytesTransferred: 1 << 16}}, res, "step %d", i)
		assert.Equal(t, step.uploads, uploads(), "step %d", i)
		b, err := os.ReadFile(e.remote("big.bin"))
		require.NoError(t, err)
		assert.Equal(t, step.content, string(b), "step %d", i)
		fi, err := os.Stat(e.remote("big.bin"))
		require.NoError(t, err)
		assert.Equal(t, step.mode, fi.Mode().Perm(), "step %d", i)
	}
	assert.Empty(t, e.scratchLeft())
}

// Two file mappings of one batch with the same target: the last one wins on
// every sync, as in a full sync (such a target keeps no manifest).
func TestIncrementalDuplicateFileTargets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	x := e.write("x.txt", "from x", 0o644)
	y := e.write("y.txt", "from y", 0o644)
	target := e.remote("t.txt")
	for _, tt := range []struct {
		name    string
		sources []string
		want    string
	}{
		{"x then y", []string{x, y}, "from y"},
		{"x then y again", []string{x, y}, "from y"},
		{"y then x", []string{y, x}, "from x"},
		{"y then x again", []string{y, x}, "from x"},
		{"x then y once more", []string{x, y}, "from y"},
	} {
		var files []Mapping
		for _, src := range tt.sources {
			files = append(files, Mapping{SourcePath: src, TargetPath: target, Kind: KindFile})
		}
		res, err := In(ctx, cfg, []Operation{{ID: "op", Files: files}})
		require.NoError(t, err, tt.name)
		assert.Equal(t, []Result{{OperationID: "op", FilesTransferred: 2, BytesTransferred: 12}}, res, tt.name)
		b, err := os.ReadFile(target)
		require.NoError(t, err)
		assert.Equal(t, tt.want, string(b), tt.name)
	}
	assert.Empty(t, e.scratchLeft())
}
