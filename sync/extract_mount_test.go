package sync

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// extractWith is extractBytes with a hook on the extractor before it reads.
func extractWith(t testing.TB, archive []byte, target string, hook func(*extractor)) error {
	t.Helper()
	x, created, err := newExtractor(target, ".paperclip-upload-test-stage")
	require.NoError(t, err)
	defer x.cleanup()
	hook(x)
	if err := x.read(bytes.NewReader(archive)); err != nil {
		removeCreated(created)
		return err
	}
	return x.commit()
}

// stagingLeft names the staging folders left anywhere below root.
func stagingLeft(t testing.TB, root string) []string {
	t.Helper()
	var left []string
	for _, rel := range listDir(t, root) {
		if strings.Contains(rel, ".paperclip-upload") {
			left = append(left, rel)
		}
	}
	return left
}

// An existing target is staged into (it may be a mount point, and its
// parent need not be writable, as with GNU tar -C); a missing one beside.
func TestExtractStagesInsideAnExistingTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, target string)
		in    bool
	}{
		{"missing target", func(*testing.T, string) {}, false},
		{"existing folder", func(t *testing.T, target string) { require.NoError(t, os.Mkdir(target, 0o755)) }, true},
		{"symlink to a folder", func(t *testing.T, target string) {
			real := target + "-real"
			require.NoError(t, os.Mkdir(real, 0o755))
			require.NoError(t, os.Symlink(real, target))
		}, true},
		{"existing file", func(t *testing.T, target string) { require.NoError(t, os.WriteFile(target, nil, 0o644)) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "t")
			tt.setup(t, target)
			x, _, err := newExtractor(target, ".paperclip-upload-test-stage")
			require.NoError(t, err)
			stage := x.stage
			want := filepath.Dir(target)
			if tt.in {
				want = target
			}
			assert.Equal(t, want, filepath.Dir(stage))
			x.cleanup()
			_, err = os.Lstat(stage)
			assert.True(t, errors.Is(err, os.ErrNotExist), "the stage is removed")
		})
	}
}

// A destination folder on another file system (a mount point below the
// target) receives a copy of its staged tree made before anything moves,
// and the result is what GNU tar extracts. The device lookup is swapped so
// that this runs without mounts; TestExtractAcrossMounts mounts for real.
func TestExtractCopiesWhatGoesToAnotherFileSystem(t *testing.T) {
	t.Parallel()
	requireGNUTar(t)
	archive := buildTar(t, []member{
		{typ: tar.TypeReg, name: "./a.txt", body: "new a"},
		{typ: tar.TypeDir, name: "./m/", mode: 0o750},
		{typ: tar.TypeReg, name: "./m/x.txt", body: "new x", mode: 0o444},
		{typ: tar.TypeLink, name: "./m/x-hard", link: "./m/x.txt"},
		{typ: tar.TypeSymlink, name: "./m/to-x", link: "x.txt"},
		{typ: tar.TypeFifo, name: "./m/pipe", mode: 0o600},
		{typ: tar.TypeReg, name: "./m/deep/new/file", body: "deep"},
		{typ: tar.TypeReg, name: "./m/n/y.txt", body: "new y"},
		{typ: tar.TypeDir, name: "./m/ro/", mode: 0o555},
	})
	prepare := func(dir string) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "m/n"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "m/deep"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("old a"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "m/x.txt"), []byte("old x"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "m/keep"), []byte("k"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "m/n/y.txt"), []byte("old y"), 0o644))
	}
	root := t.TempDir()
	gnu, ours := filepath.Join(root, "gnu"), filepath.Join(root, "ours")
	prepare(gnu)
	prepare(ours)
	cmd := exec.Command("tar", "-xf", "-", "-C", gnu)
	cmd.Stdin = bytes.NewReader(archive)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	// m and m/n (nested) are other file systems.
	foreign := map[string]uint64{filepath.Join(ours, "m"): 1 << 60, filepath.Join(ours, "m/n"): 1<<60 + 1}
	var x *extractor
	require.NoError(t, extractWith(t, archive, ours, func(e *extractor) {
		x = e
		e.devOf = func(p string, fi os.FileInfo) uint64 {
			if d, ok := foreign[p]; ok {
				return d
			}
			if strings.HasPrefix(p, filepath.Join(ours, "m")+"/") {
				return foreign[filepath.Join(ours, "m")]
			}
			return statDev(p, fi)
		}
	}))
	assert.Equal(t, treeSnapshot(t, gnu), treeSnapshot(t, ours))
	assert.Empty(t, stagingLeft(t, root))
	assert.Empty(t, x.foreign, "the copies are gone")
	a, _ := os.Stat(filepath.Join(ours, "m/x.txt"))
	b, _ := os.Stat(filepath.Join(ours, "m/x-hard"))
	assert.True(t, os.SameFile(a, b), "hard links within the copy stay linked")
	require.NoError(t, os.Chmod(filepath.Join(ours, "m/ro"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(gnu, "m/ro"), 0o755))
}

// A conflict found after a copy to another file system changes nothing in
// the target and leaves no copy behind.
func TestExtractConflictAfterACopyChangesNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	target := filepath.Join(root, "t")
	require.NoError(t, os.MkdirAll(filepath.Join(target, "m"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(target, "n"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(target, "zbusy/inner"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(target, "m/a.txt"), []byte("old"), 0o644))
	archive := buildTar(t, []member{
		{typ: tar.TypeReg, name: "m/a.txt", body: "new"},
		{typ: tar.TypeReg, name: "n/b.txt", body: "b"},
		{typ: tar.TypeReg, name: "zbusy", body: "file"},
	})
	copied := false
	err := extractWith(t, archive, target, func(x *extractor) {
		x.devOf = func(p string, fi os.FileInfo) uint64 {
			switch p {
			case filepath.Join(target, "m"):
				return 1 << 60
			case filepath.Join(target, "n"):
				// Checked after m: m's copy is in place, hidden in m.
				b, err := os.ReadFile(filepath.Join(target, "m", filepath.Base(x.stage), "a.txt"))
				copied = err == nil && string(b) == "new"
			}
			return statDev(p, fi)
		}
	})
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENOTEMPTY))
	assert.True(t, copied, "m was checked (and copied) before the conflict")
	b, _ := os.ReadFile(filepath.Join(target, "m/a.txt"))
	assert.Equal(t, "old", string(b))
	assert.ElementsMatch(t, []string{"t", "t/m", "t/m/a.txt", "t/n", "t/zbusy", "t/zbusy/inner"}, listDir(t, root))
}
