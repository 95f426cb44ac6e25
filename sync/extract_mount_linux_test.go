package sync

import (
	"archive/tar"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mountTmpfs mounts a fresh tmpfs at dir (created if missing) for the
// test's lifetime, or skips the test when it cannot (not root, or no
// permission to mount here).
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a second file system needs root")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// Real mount points: the target is one (a Docker volume), or holds one;
// GNU tar -C extracts into both, and so does the extractor, whole.
func TestExtractAcrossMounts(t *testing.T) {
	archive := buildTar(t, []member{
		{typ: tar.TypeReg, name: "./a.txt", body: "new a"},
		{typ: tar.TypeReg, name: "./m/x.txt", body: "new x"},
		{typ: tar.TypeLink, name: "./m/x-hard", link: "./m/x.txt"},
		{typ: tar.TypeReg, name: "./m/sub/y.txt", body: "y"},
	})
	tests := []struct {
		name  string
		mount func(target string) string
	}{
		{"target is a mount point", func(target string) string { return target }},
		{"mount point below the target", func(target string) string { return filepath.Join(target, "m") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			target := filepath.Join(root, "t")
			mountTmpfs(t, tt.mount(target))
			require.NoError(t, os.MkdirAll(filepath.Join(target, "m"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(target, "a.txt"), []byte("old a"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(target, "m/keep"), []byte("k"), 0o644))

			require.NoError(t, extractBytes(t, archive, target))
			for rel, want := range map[string]string{"a.txt": "new a", "m/x.txt": "new x", "m/x-hard": "new x", "m/sub/y.txt": "y", "m/keep": "k"} {
				b, err := os.ReadFile(filepath.Join(target, rel))
				require.NoError(t, err)
				assert.Equal(t, want, string(b), rel)
			}
			assert.Empty(t, stagingLeft(t, root))
		})
	}
}

// A failure after the check (here a conflict below the mount point)
// leaves the target as it was on both file systems.
func TestExtractAcrossMountsConflictChangesNothing(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "t")
	mountTmpfs(t, filepath.Join(target, "m"))
	require.NoError(t, os.WriteFile(filepath.Join(target, "a.txt"), []byte("old a"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(target, "m/x.txt"), []byte("old x"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(target, "m/zbusy/inner"), 0o755))
	archive := buildTar(t, []member{
		{typ: tar.TypeReg, name: "./a.txt", body: "new a"},
		{typ: tar.TypeReg, name: "./m/x.txt", body: "new x"},
		{typ: tar.TypeReg, name: "./m/zbusy", body: "file"},
	})
	err := extractBytes(t, archive, target)
	require.ErrorIs(t, err, syscall.ENOTEMPTY)
	assert.ElementsMatch(t, []string{"a.txt", "m", "m/x.txt", "m/zbusy", "m/zbusy/inner"}, listDir(t, target))
	b, _ := os.ReadFile(filepath.Join(target, "a.txt"))
	assert.Equal(t, "old a", string(b))
}
