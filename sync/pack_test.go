package sync

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func requireGNUTar(t *testing.T) {
	t.Helper()
	out, err := exec.Command("tar", "--version").Output()
	if err != nil || !strings.Contains(string(out), "GNU tar") {
		t.Skip("GNU tar is not installed")
	}
}

func makeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if target, ok := strings.CutPrefix(content, "->"); ok {
			require.NoError(t, os.Symlink(target, p))
			continue
		}
		if rel[len(rel)-1] == '/' {
			require.NoError(t, os.MkdirAll(p, 0o755))
			continue
		}
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// gnuTarMembers archives root the way the plugin's pack step does and
// returns the member names GNU tar wrote.
func gnuTarMembers(t *testing.T, root string, exclude []string, follow bool) []string {
	t.Helper()
	dir := t.TempDir()
	names, err := readDirNames(root)
	require.NoError(t, err)
	var list bytes.Buffer
	for _, n := range names {
		list.WriteString("./" + n + "\x00")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "names"), list.Bytes(), 0o600))
	args := []string{"-c", "--no-xattrs"}
	if follow {
		args = append(args, "-h")
	}
	args = append(args, "-f", filepath.Join(dir, "a.tar"), "-C", root, "--exclude", "._*")
	for _, e := range exclude {
		args = append(args, "--exclude", e)
	}
	args = append(args, "--null", "-T", filepath.Join(dir, "names"))
	out, err := exec.Command("tar", args...).CombinedOutput()
	require.NoError(t, err, string(out))
	f, err := os.Open(filepath.Join(dir, "a.tar"))
	require.NoError(t, err)
	defer f.Close()
	var members []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		members = append(members, strings.TrimSuffix(h.Name, "/")+":"+string(h.Typeflag))
	}
	sort.Strings(members)
	return members
}

func ourMembers(t *testing.T, root string, exclude []string, follow bool) []string {
	t.Helper()
	entries, err := walkHostTree(root, exclude, follow)
	require.NoError(t, err)
	var members []string
	for _, e := range entries {
		members = append(members, "./"+e.rel+":"+string(e.kind))
	}
	sort.Strings(members)
	return members
}

// The host walk must pick exactly the members GNU tar --exclude picks (the
// plugin packs with GNU tar), for the pattern forms hosts use.
func TestWalkExcludesAsGNUTar(t *testing.T) {
	t.Parallel()
	requireGNUTar(t)
	root := t.TempDir()
	makeTree(t, root, map[string]string{
		"keep/a.txt": "a", "keep/b.log": "b", "skip.log": "s", "node_modules/x/y.js": "y",
		"src/node_modules/z.js": "z", "src/main.go": "m", "._meta": "apple", "dir/._inner": "apple",
		".git/HEAD": "h", ".git/objects/ab": "o", "a b/c d.txt": "sp", "deep/er/est/file.tmp": "t",
		"lnk": "->keep/a.txt", "build/": "", "Build/out.bin": "o", "x[1].txt": "br", "q?.txt": "q",
		"star*.txt": "st", "dot.hidden/.env": "e", "keep/sub/a.txt": "aa",
	})
	patterns := [][]string{
		nil,
		{"*.log"},
		{"node_modules"},
		{"./node_modules"},
		{"src/node_modules"},
		{".git"},
		{"*.tmp", "build"},
		{"keep/*"},
		{"a.txt"},
		{"keep"},
		{"*/a.txt"},
		{"[Bb]uild"},
		{"x\\[1\\].txt"},
		{"q?.txt"},
		{"star\\*.txt"},
		{"*"},
		{"dot.*"},
		{"deep/er"},
		{"[!k]*"},
		{"[[:upper:]]*"},
		{"lnk"},
		{"*/"},
		{"keep/"},
	}
	for _, pats := range patterns {
		for _, follow := range []bool{false, true} {
			assert.Equal(t, gnuTarMembers(t, root, pats, follow), ourMembers(t, root, pats, follow), "exclude %q follow %v", pats, follow)
		}
	}
}

func TestWalkHardLinksSocketsAndLoops(t *testing.T) {
	t.Parallel()
	requireGNUTar(t)
	root := t.TempDir()
	makeTree(t, root, map[string]string{"a/data": "d", "b/other": "o"})
	require.NoError(t, os.Link(filepath.Join(root, "a/data"), filepath.Join(root, "b/copy")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	assert.Equal(t, gnuTarMembers(t, root, nil, false), ourMembers(t, root, nil, false))
	entries, err := walkHostTree(root, nil, false)
	require.NoError(t, err)
	for _, e := range entries {
		if e.rel == "b/copy" {
			assert.Equal(t, byte(tar.TypeLink), e.kind)
			assert.Equal(t, "a/data", e.link)
		}
	}

	// A symlink loop followed with -h is an error, not a hang (GNU tar
	// crashes on it).
	require.NoError(t, os.Symlink("..", filepath.Join(root, "a/up")))
	_, err = walkHostTree(root, nil, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "loops back")
	// A dangling link cannot be followed.
	require.NoError(t, os.Remove(filepath.Join(root, "a/up")))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(root, "dangling")))
	_, err = walkHostTree(root, nil, true)
	require.Error(t, err)
	_, err = walkHostTree(root, nil, false)
	require.NoError(t, err)
}

// A written tar extracts with GNU tar into the same tree (content, modes,
// links, hard links).
func TestWriteTarExtractsWithGNUTar(t *testing.T) {
	t.Parallel()
	requireGNUTar(t)
	root := t.TempDir()
	makeTree(t, root, map[string]string{"nested/data.txt": "hello", "shortcut": "->nested/data.txt", "empty/": ""})
	require.NoError(t, os.WriteFile(filepath.Join(root, "secret"), []byte("top"), 0o600))
	require.NoError(t, os.Chmod(filepath.Join(root, "secret"), 0o600))
	require.NoError(t, os.Link(filepath.Join(root, "secret"), filepath.Join(root, "nested/secret-link")))
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("f", 130)
	makeTree(t, root, map[string]string{long: "long"})
	entries, err := walkHostTree(root, nil, false)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, writeTar(&buf, entries, nil))
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	require.NoError(t, os.Mkdir(out, 0o755))
	cmd := exec.Command("tar", "-xf", "-", "-C", out)
	cmd.Stdin = &buf
	o, err := cmd.CombinedOutput()
	require.NoError(t, err, string(o))
	assert.Equal(t, treeSnapshot(t, root), treeSnapshot(t, out))
	a, _ := os.Stat(filepath.Join(out, "secret"))
	b, _ := os.Stat(filepath.Join(out, "nested/secret-link"))
	assert.True(t, os.SameFile(a, b), "hard links stay linked")
}

// treeSnapshot describes a tree: each entry's type, permissions and content
// or link target (folder times and owners aside).
func treeSnapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link:" + l
		case fi.IsDir():
			out[rel] = "dir:" + fi.Mode().Perm().String()
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file:" + fi.Mode().Perm().String() + ":" + string(b)
		default:
			out[rel] = "other:" + fi.Mode().String()
		}
		return nil
	}))
	return out
}
