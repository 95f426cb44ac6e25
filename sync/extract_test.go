package sync

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// member is one entry of a test archive.
type member struct {
	typ   byte
	name  string
	link  string
	body  string
	mode  int64
	major int64
	pax   map[string]string
}

func buildTar(t testing.TB, members []member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, m := range members {
		mode := m.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Typeflag: m.typ, Name: m.name, Linkname: m.link, Mode: mode, Size: int64(len(m.body)),
			ModTime: mtime, Uname: "daytona", Gname: "daytona", Devmajor: m.major, PAXRecords: m.pax}
		if m.typ == tar.TypeDir || m.typ == tar.TypeSymlink || m.typ == tar.TypeLink || m.typ == tar.TypeChar {
			h.Size = 0
		}
		if m.pax != nil {
			h.Format = tar.FormatPAX
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := tw.Write([]byte(m.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

// extractBytes runs the extractor over an archive into target.
func extractBytes(t testing.TB, archive []byte, target string) error {
	t.Helper()
	x, created, err := newExtractor(target, ".paperclip-upload-test-stage")
	require.NoError(t, err)
	defer x.cleanup()
	// Listing lines in refusals print times in UTC whatever the zone.
	x.columns = newListingColumns()
	x.columns.loc = time.UTC
	if err := x.read(bytes.NewReader(archive)); err != nil {
		removeCreated(created)
		return err
	}
	return x.commit()
}

// listDir names everything below dir (for "nothing was written" checks).
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// Hostile archives are refused before anything reaches the host: the
// target is not created, no staging is left, nothing is written outside.
func TestExtractRefusesHostileArchives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		members []member
		err     string
	}{
		{"traversal", []member{{typ: tar.TypeReg, name: "../escape.txt", body: "x"}},
			"Daytona syncOut refusing tarball member that escapes the extraction dir: ../escape.txt"},
		{"traversal inside", []member{{typ: tar.TypeReg, name: "ok/../../escape.txt", body: "x"}},
			"Daytona syncOut refusing tarball member that escapes the extraction dir: ok/../../escape.txt"},
		{"dot-dot that stays inside", []member{{typ: tar.TypeReg, name: "a/../b.txt", body: "x"}},
			"Daytona syncOut refusing tarball member that escapes the extraction dir: a/../b.txt"},
		{"absolute", []member{{typ: tar.TypeReg, name: "/tmp/abs-escape.txt", body: "x"}},
			"Daytona syncOut refusing tarball member that escapes the extraction dir: /tmp/abs-escape.txt"},
		{"symlink out", []member{{typ: tar.TypeSymlink, name: "evil", link: "../../outside.txt"}},
			"Daytona syncOut refusing tarball link whose target escapes the extraction dir: evil -> ../../outside.txt"},
		{"absolute symlink", []member{{typ: tar.TypeSymlink, name: "evil", link: "/etc"}},
			"Daytona syncOut refusing tarball link whose target escapes the extraction dir: evil -> /etc"},
		{"ambiguous symlink name", []member{{typ: tar.TypeSymlink, name: "evil -> decoy", link: "../../outside.txt"}},
			"Daytona syncOut refusing unparseable or ambiguous symlink entry: lrw-r--r-- daytona/daytona   0 2025-05-06 07:08 evil -> decoy -> ../../outside.txt"},
		{"ambiguous benign symlink name", []member{{typ: tar.TypeSymlink, name: "a -> b", link: "c"}},
			"Daytona syncOut refusing unparseable or ambiguous symlink entry"},
		{"symlink then a file through it", []member{
			{typ: tar.TypeSymlink, name: "dir", link: "sub"}, {typ: tar.TypeDir, name: "sub/"},
			{typ: tar.TypeReg, name: "dir/planted.txt", body: "x"}},
			"Daytona syncOut refusing tarball member written through a link: dir/planted.txt"},
		{"symlink out then a file through it", []member{
			{typ: tar.TypeSymlink, name: "out", link: "../.."}, {typ: tar.TypeReg, name: "out/planted.txt", body: "x"}},
			"Daytona syncOut refusing tarball link whose target escapes the extraction dir: out -> ../.."},
		{"link chain out", []member{
			{typ: tar.TypeSymlink, name: "a", link: "."}, {typ: tar.TypeSymlink, name: "b", link: "a/.."}},
			"Daytona syncOut refusing tarball link whose target escapes the extraction dir: b -> a/.."},
		{"hard link out", []member{{typ: tar.TypeLink, name: "h", link: "../../etc/passwd"}},
			"Daytona syncOut refusing tarball link whose target escapes the extraction dir: h -> ../../etc/passwd"},
		{"hard link to an absolute path", []member{{typ: tar.TypeLink, name: "h", link: "/etc/passwd"}},
			"Daytona syncOut refusing tarball link whose target escapes the extraction dir: h -> /etc/passwd"},
		{"hard link to nothing in the archive", []member{{typ: tar.TypeLink, name: "h", link: "missing"}},
			"Daytona syncOut refusing hardlink to a member that is not a regular file of the archive: h link to missing"},
		{"hard link to a symlink", []member{{typ: tar.TypeSymlink, name: "s", link: "x"}, {typ: tar.TypeLink, name: "h", link: "s"}},
			"Daytona syncOut refusing hardlink to a member that is not a regular file of the archive: h link to s"},
		{"hard link deep out", []member{{typ: tar.TypeReg, name: "deep/a/b/x", body: "x"}, {typ: tar.TypeLink, name: "deep/a/b/h", link: "../../z"}},
			"Daytona syncOut refusing tarball link whose target escapes the extraction dir: deep/a/b/h -> ../../z"},
		{"device", []member{{typ: tar.TypeChar, name: "null", major: 1}},
			"Daytona syncOut refusing tarball with an unparseable entry listing: crw-r--r-- daytona/daytona 1,0 2025-05-06 07:08 null"},
		{"file under a file", []member{{typ: tar.TypeReg, name: "f", body: "x"}, {typ: tar.TypeReg, name: "f/g", body: "y"}},
			"Daytona syncOut refusing tarball member below a non-directory member: f/g"},
		{"root replaced by a file", []member{{typ: tar.TypeReg, name: ".", body: ""}},
			"replaces the extraction dir"},
		{"listing line too long", []member{{typ: tar.TypeReg, name: strings.Repeat("n", 70<<10), body: "x"}},
			"Daytona sync archive entry listing too long"},
		{"not a tar", nil, "Daytona sync archive listing failed"},
	}
	// The plugin's words exactly, as its failing `tar -tvf` gives them.
	err := extractBytes(t, []byte(strings.Repeat("not a tar archive ", 64)), filepath.Join(t.TempDir(), "restored"))
	assert.EqualError(t, err, "Daytona sync archive listing failed")
	var are *archiveReadError
	assert.True(t, errors.As(err, &are), "the cause is kept")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			target := filepath.Join(root, "restored")
			archive := []byte("this is not a tar archive, just some bytes that go on for a while.......................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................")
			if tt.members != nil {
				archive = buildTar(t, tt.members)
			}
			err := extractBytes(t, archive, target)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
			assert.Empty(t, listDir(t, root), "nothing may be written")
			_, statErr := os.Stat("/tmp/abs-escape.txt")
			assert.True(t, errors.Is(statErr, os.ErrNotExist))
		})
	}
}

// Sparse members declare a size the archive does not hold (a terabyte in a
// few blocks); the sandbox's own tar never writes them, so they are refused.
func TestExtractRefusesSparseMembers(t *testing.T) {
	t.Parallel()
	requireGNUTar(t)
	for _, format := range []string{"gnu", "pax"} {
		dir := t.TempDir()
		big := filepath.Join(dir, "big")
		require.NoError(t, os.WriteFile(big, []byte("x"), 0o644))
		require.NoError(t, os.Truncate(big, 64<<20))
		out, err := exec.Command("tar", "-cSf", filepath.Join(dir, "a.tar"), "--format="+format, "-C", dir, "big").CombinedOutput()
		require.NoError(t, err, string(out))
		archive, err := os.ReadFile(filepath.Join(dir, "a.tar"))
		require.NoError(t, err)
		root := t.TempDir()
		err = extractBytes(t, archive, filepath.Join(root, "restored"))
		require.Error(t, err, format)
		assert.Contains(t, err.Error(), "Daytona syncOut refusing tarball member of an unsupported type")
		assert.Empty(t, listDir(t, root))
	}
}

func TestExtractLimits(t *testing.T) {
	t.Parallel()
	// The entry limit is checked as entries stream in, without holding them.
	var members []member
	for i := 0; i < 3; i++ {
		members = append(members, member{typ: tar.TypeDir, name: fmt.Sprintf("d%d/", i)})
	}
	x, _, err := newExtractor(filepath.Join(t.TempDir(), "t"), "stage")
	require.NoError(t, err)
	defer x.cleanup()
	x.entries = maxEntries - 2
	err = x.read(bytes.NewReader(buildTar(t, members)))
	assert.EqualError(t, err, "Daytona syncOut tar listing entry limit exceeded (250000)")

	x2, _, err := newExtractor(filepath.Join(t.TempDir(), "t"), "stage")
	require.NoError(t, err)
	defer x2.cleanup()
	x2.listed = maxListingBytes - 10
	err = x2.read(bytes.NewReader(buildTar(t, members)))
	assert.EqualError(t, err, "Daytona syncOut tar total listing byte limit exceeded (64 MiB)")
}

// Benign archives extract as GNU tar extracts them, into a new target and
// merged into an existing one.
func TestExtractMatchesGNUTar(t *testing.T) {
	t.Parallel()
	requireGNUTar(t)
	archive := buildTar(t, []member{
		{typ: tar.TypeDir, name: "./nested/", mode: 0o755},
		{typ: tar.TypeReg, name: "./nested/data.txt", body: "hello world"},
		{typ: tar.TypeReg, name: "./secret", body: "top-secret", mode: 0o600},
		{typ: tar.TypeSymlink, name: "./shortcut", link: "nested/data.txt"},
		{typ: tar.TypeLink, name: "./nested/hard", link: "./secret"},
		{typ: tar.TypeReg, name: "./implied/dirs/file", body: "i", mode: 0o640},
		{typ: tar.TypeDir, name: "./ro/", mode: 0o555},
		{typ: tar.TypeReg, name: "./ro/inside", body: "r", mode: 0o444},
		{typ: tar.TypeFifo, name: "./pipe", mode: 0o600},
		{typ: tar.TypeReg, name: "./replaced", body: "first"},
		{typ: tar.TypeReg, name: "./replaced", body: "second"},
		{typ: tar.TypeSymlink, name: "./up", link: "nested/.."},
		{typ: tar.TypeReg, name: "./existing-file-becomes-dir/x", body: "x"},
		{typ: tar.TypeSymlink, name: "./link-becomes-file", link: "nested"},
		{typ: tar.TypeReg, name: "./link-becomes-file", body: "now a file"},
		{typ: tar.TypeReg, name: "./flip", body: "one"},
		{typ: tar.TypeSymlink, name: "./flip", link: "nested"},
		{typ: tar.TypeReg, name: "./flip", body: "two"},
		{typ: tar.TypeSymlink, name: "./flop", link: "secret"},
		{typ: tar.TypeReg, name: "./flop", body: "file"},
		{typ: tar.TypeSymlink, name: "./flop", link: "nested/data.txt"},
		{typ: tar.TypeReg, name: "./dir-becomes-file/x", body: "x"},
		{typ: tar.TypeDir, name: "./file-becomes-dir/", mode: 0o750},
	})
	prepare := func(dir string) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "nested"), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "keep-me"), []byte("k"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "nested/data.txt"), []byte("old"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "secret"), []byte("old-secret"), 0o644))
		require.NoError(t, os.Mkdir(filepath.Join(dir, "existing-file-becomes-dir"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "file-becomes-dir"), []byte("f"), 0o644))
	}
	for _, existing := range []bool{false, true} {
		root := t.TempDir()
		gnu, ours := filepath.Join(root, "gnu"), filepath.Join(root, "ours")
		require.NoError(t, os.Mkdir(gnu, 0o755))
		if existing {
			prepare(gnu)
			prepare(ours)
		}
		cmd := exec.Command("tar", "-xf", "-", "-C", gnu)
		cmd.Stdin = bytes.NewReader(archive)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		require.NoError(t, extractBytes(t, archive, ours))
		assert.Equal(t, treeSnapshot(t, gnu), treeSnapshot(t, ours), "existing target: %v", existing)
		a, _ := os.Stat(filepath.Join(ours, "secret"))
		b, _ := os.Stat(filepath.Join(ours, "nested/hard"))
		assert.True(t, os.SameFile(a, b))
		fi, err := os.Stat(filepath.Join(ours, "nested/data.txt"))
		require.NoError(t, err)
		assert.Equal(t, time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC), fi.ModTime().UTC(), "mtimes are restored")
		assert.NotContains(t, strings.Join(listDir(t, root), " "), ".paperclip-upload")
		_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
	}
}

// An existing folder with content where the archive has a file fails the
// extraction before anything moves (tar fails on it too).
func TestExtractConflictChangesNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	target := filepath.Join(root, "t")
	require.NoError(t, os.MkdirAll(filepath.Join(target, "busy/inner"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(target, "a.txt"), []byte("old"), 0o644))
	archive := buildTar(t, []member{{typ: tar.TypeReg, name: "a.txt", body: "new"}, {typ: tar.TypeReg, name: "busy", body: "file"}})
	err := extractBytes(t, archive, target)
	require.Error(t, err)
	assert.True(t, errors.Is(err, syscall.ENOTEMPTY))
	b, _ := os.ReadFile(filepath.Join(target, "a.txt"))
	assert.Equal(t, "old", string(b))
	assert.ElementsMatch(t, []string{"t", "t/a.txt", "t/busy", "t/busy/inner"}, listDir(t, root))
}

// A pre-existing symlink in the target is replaced, never followed.
func TestExtractNeverFollowsTargetLinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := filepath.Join(root, "outside")
	target := filepath.Join(root, "t")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.MkdirAll(target, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(target, "d")))
	archive := buildTar(t, []member{{typ: tar.TypeDir, name: "d/"}, {typ: tar.TypeReg, name: "d/f", body: "x"}})
	require.NoError(t, extractBytes(t, archive, target))
	assert.Empty(t, listDir(t, outside))
	fi, err := os.Lstat(filepath.Join(target, "d"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
}

// The empty archive the plugin's tests download (1024 zero bytes) and an
// empty download are clean no-ops that still create the target.
func TestExtractEmptyArchives(t *testing.T) {
	t.Parallel()
	for _, archive := range [][]byte{make([]byte, 1024), nil} {
		target := filepath.Join(t.TempDir(), "assets")
		require.NoError(t, extractBytes(t, archive, target))
		fi, err := os.Stat(target)
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Empty(t, listDir(t, target))
	}
}

// Setuid, setgid and sticky bits from a sandbox-authored archive are
// dropped for files, folders and pipes, whoever extracts; the permission
// bits follow GNU tar (the umask applies unless extracting as root).
func TestExtractDropsSpecialModeBits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mode   int64
		asRoot bool
		want   os.FileMode
	}{
		{"setuid file as a user", 0o4755, false, 0o755},
		{"setuid file as root", 0o4755, true, 0o755},
		{"setgid folder as a user", 0o2777, false, 0o755},
		{"setgid folder as root", 0o2777, true, 0o777},
		{"sticky folder as root", 0o1777, true, 0o777},
		{"all three as root", 0o7700, true, 0o700},
		{"plain file as a user", 0o666, false, 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &extractor{umask: 0o022, asRoot: tt.asRoot}
			assert.Equal(t, tt.want, x.mode(tt.mode))
		})
	}

	archive := buildTar(t, []member{
		{typ: tar.TypeReg, name: "./suid", body: "#!/bin/sh\nid\n", mode: 0o4755},
		{typ: tar.TypeDir, name: "./sgid/", mode: 0o2775},
		{typ: tar.TypeDir, name: "./sticky/", mode: 0o1777},
		{typ: tar.TypeFifo, name: "./pipe", mode: 0o6600},
		{typ: tar.TypeDir, name: "./", mode: 0o3755},
	})
	for _, existing := range []bool{false, true} {
		target := filepath.Join(t.TempDir(), "t")
		if existing {
			require.NoError(t, os.Mkdir(target, 0o755))
		}
		require.NoError(t, extractBytes(t, archive, target))
		for _, rel := range []string{".", "suid", "sgid", "sticky", "pipe"} {
			fi, err := os.Lstat(filepath.Join(target, rel))
			require.NoError(t, err)
			assert.Zero(t, fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky), "%s (existing target %v): %v", rel, existing, fi.Mode())
		}
	}
}
