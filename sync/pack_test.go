package sync

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/daytona"
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
	require.NoError(t, writeTar(&buf, entries, nil, neverRacy))
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

// hookWriter calls hook once, before the first write that goes past the
// first h.after bytes (a point inside a member's content).
type hookWriter struct {
	w     io.Writer
	after int64
	n     int64
	hook  func()
}

func (h *hookWriter) Write(p []byte) (int, error) {
	if h.hook != nil && h.n+int64(len(p)) > h.after {
		h.hook()
		h.hook = nil
	}
	h.n += int64(len(p))
	return h.w.Write(p)
}

// readTarFile returns the header and content of the archive's member name.
func readTarFile(t *testing.T, archive []byte, name string) (*tar.Header, string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		require.NoError(t, err, "no member %s", name)
		if h.Name == name {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return h, string(b)
		}
	}
}

// A file changed between the walk and its turn in the archive is archived
// as it is when its turn comes (GNU tar stats each file just before
// reading it), and its recorded signature is the one archived.
func TestWriteTarTakesFilesAsTheyAreWhenRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		change  func(t *testing.T, p string)
		content string
		mode    int64
	}{
		{"grown", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte("longer than before"), 0o644))
		}, "longer than before", 0o644},
		{"shrunk", func(t *testing.T, p string) {
			require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		}, "x", 0o644},
		{"emptied", func(t *testing.T, p string) {
			require.NoError(t, os.Truncate(p, 0))
		}, "", 0o644},
		{"chmod", func(t *testing.T, p string) {
			require.NoError(t, os.Chmod(p, 0o600))
		}, "original", 0o600},
		{"replaced by rename, as editors save", func(t *testing.T, p string) {
			tmp := p + ".swp"
			require.NoError(t, os.WriteFile(tmp, []byte("saved"), 0o640))
			require.NoError(t, os.Chmod(tmp, 0o640))
			require.NoError(t, os.Rename(tmp, p))
		}, "saved", 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, "a.txt")
			require.NoError(t, os.WriteFile(p, []byte("original"), 0o644))
			require.NoError(t, os.Chmod(p, 0o644))
			entries, err := walkHostTree(root, nil, false)
			require.NoError(t, err)
			require.Len(t, entries, 1)
			// Make sure a rewrite within the same clock tick still differs.
			time.Sleep(10 * time.Millisecond)
			tt.change(t, p)

			var buf bytes.Buffer
			require.NoError(t, writeTar(&buf, entries, nil, neverRacy))
			h, content := readTarFile(t, buf.Bytes(), "./a.txt")
			assert.Equal(t, tt.content, content)
			assert.Equal(t, int64(len(tt.content)), h.Size)
			assert.Equal(t, tt.mode, h.Mode)

			fi, err := os.Lstat(p)
			require.NoError(t, err)
			assert.Equal(t, sigOf(fi.Sys().(*syscall.Stat_t), tar.TypeReg, false), entries[0].sig, "the manifest records what was sent")
		})
	}
}

// A change during the read still fails the pack, as GNU tar fails it, and
// so does a name that no longer holds a regular file.
func TestWriteTarFailsOnFilesChangedWhileRead(t *testing.T) {
	t.Parallel()
	const size = 1 << 20 // several reads of writeTar's buffer
	tests := []struct {
		name   string
		before func(t *testing.T, p string) // between the walk and writeTar
		during func(p string)               // once the content is being copied
	}{
		{"appended to while read", nil, func(p string) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err == nil {
				_, _ = f.WriteString("more")
				f.Close()
			}
		}},
		{"truncated while read", nil, func(p string) { _ = os.Truncate(p, 10) }},
		{"rewritten in place while read", nil, func(p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				_, _ = f.WriteAt([]byte("changed"), size-7)
				f.Close()
			}
		}},
		{"replaced by a symlink", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink("/etc/hostname", p))
		}, nil},
		{"replaced by a pipe", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, syscall.Mkfifo(p, 0o644))
		}, nil},
		{"replaced by a folder", func(t *testing.T, p string) {
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Mkdir(p, 0o755))
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, "big.bin")
			require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte("z"), size), 0o644))
			entries, err := walkHostTree(root, nil, false)
			require.NoError(t, err)
			if tt.before != nil {
				tt.before(t, p)
			}
			w := &hookWriter{w: io.Discard, after: 4096}
			if tt.during != nil {
				w.hook = func() { tt.during(p) }
			}
			err = writeTar(w, entries, nil, neverRacy)
			require.ErrorIs(t, err, errChangedWhileRead)
			assert.EqualError(t, err, "Daytona syncIn cannot archive "+p+": file changed as we read it")
		})
	}
}

// The plugin's case end to end: a file edited while the sync waits on the
// sandbox (here during the mkdir round trip, after the walk) is sent as it
// is now instead of failing the whole sync.
func TestSyncInSendsFilesEditedAfterTheWalk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := filepath.Join(e.host, "src")
	e.write("src/a.txt", "one", 0o644)
	e.write("src/b.txt", "unchanged", 0o644)
	cfg := e.config()
	cfg.Sandbox = execHook{Sandbox: e.tb, before: func(cmd string) {
		if strings.HasPrefix(cmd, "mkdir -p") {
			_ = os.WriteFile(filepath.Join(src, "a.txt"), []byte("two, longer"), 0o644)
		}
	}}
	target := e.remote("proj")
	ops := []Operation{{ID: "op", Files: []Mapping{{SourcePath: src, TargetPath: target, Kind: KindDirectory}}}}
	_, err := In(context.Background(), cfg, ops)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(target, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "two, longer", string(b))

	// The manifest holds what was sent: a second sync with nothing changed
	// sends next to nothing.
	cfg.Sandbox = e.tb
	res, err := In(context.Background(), cfg, ops)
	require.NoError(t, err)
	assert.Less(t, res[0].BytesTransferred, int64(100))
}

// execHook calls before ahead of each command it passes on.
type execHook struct {
	Sandbox
	before func(cmd string)
}

func (h execHook) Execute(ctx context.Context, req daytona.ExecuteRequest) (*daytona.ExecuteResponse, error) {
	h.before(req.Command)
	return h.Sandbox.Execute(ctx, req)
}
