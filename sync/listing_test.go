package sync

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The plugin's own tests of parseTarVerboseListingLine (file-sync-tests §14).
func TestParseListingLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line     string
		typeFlag string
		rest     string
	}{
		// GNU tar: file, dir, symlink, hardlink, numeric owner.
		{"-rw-r--r-- daytona/daytona 7560 2026-08-11 21:43 AGENTS.md", "-", "AGENTS.md"},
		{"drwxr-xr-x daytona/daytona 0 2026-08-11 21:43 nested/", "d", "nested/"},
		{"lrwxrwxrwx daytona/daytona 0 2026-08-11 21:43 shortcut -> nested/data.txt", "l", "shortcut -> nested/data.txt"},
		{"hrw-r--r-- daytona/daytona 0 2026-08-11 21:43 copy.txt link to data.txt", "h", "copy.txt link to data.txt"},
		{"-rw-r--r-- 0/0 12 2026-08-11 21:43 root-owned.txt", "-", "root-owned.txt"},
		// bsdtar (macOS), with runs of spaces and year-form dates.
		{"-rw-r--r--  0 daytona daytona  7560 Aug 11 21:43 AGENTS.md", "-", "AGENTS.md"},
		{"drwxr-xr-x  0 daytona daytona     0 Aug 11 21:43 nested/", "d", "nested/"},
		{"lrwxr-xr-x  0 daytona daytona     0 Aug 11 21:43 shortcut -> nested/data.txt", "l", "shortcut -> nested/data.txt"},
		{"hrw-r--r--  0 daytona daytona     0 Aug 11 21:43 copy.txt link to data.txt", "h", "copy.txt link to data.txt"},
		{"-rw-r--r--  0 daytona daytona  7560 Aug 11  2025 old.txt", "-", "old.txt"},
		// bsdtar with numeric ids keeps the true name, so traversal shows.
		{"-rw-r--r--  0 1001 1001  7560 Aug 11 21:43 ../escape.txt", "-", "../escape.txt"},
	}
	for _, tt := range tests {
		got, ok := parseListingLine(tt.line)
		require.True(t, ok, tt.line)
		assert.Equal(t, listingLine{typeFlag: tt.typeFlag, rest: tt.rest}, got, tt.line)
	}
	for _, line := range []string{
		"not a tar listing line",
		"tar: Error is not recoverable: exiting now",
		"crw-rw-rw- root/root 1,3 2026-08-11 21:43 dev/null",
		"crw-rw-rw-  0 root wheel  1,3 Aug 11 21:43 dev/null",
		// JavaScript's "." does not match a carriage return.
		"-rw-r--r-- a/b 1 2026-08-11 21:43 cr\rname",
	} {
		_, ok := parseListingLine(line)
		assert.False(t, ok, "%q must fail closed", line)
	}
}

// The plugin's own tests of splitLinkEntryOnce (file-sync-tests §14).
func TestSplitLinkOnce(t *testing.T) {
	t.Parallel()
	name, target, ok := splitLinkOnce("shortcut -> nested/data.txt", " -> ")
	assert.True(t, ok)
	assert.Equal(t, []string{"shortcut", "nested/data.txt"}, []string{name, target})
	name, target, ok = splitLinkOnce("copy.txt link to data.txt", " link to ")
	assert.True(t, ok)
	assert.Equal(t, []string{"copy.txt", "data.txt"}, []string{name, target})
	for _, tt := range [][2]string{
		{"no delimiter here", " -> "},
		{"evil -> decoy -> ../../outside.txt", " -> "},
		{"a link to b link to ../../outside.txt", " link to "},
	} {
		_, _, ok := splitLinkOnce(tt[0], tt[1])
		assert.False(t, ok, tt[0])
	}
}

func TestCheckListingLine(t *testing.T) {
	t.Parallel()
	tests := []struct{ line, err string }{
		{"-rw-r--r-- a/b 1 2026-08-11 21:43 ok.txt", ""},
		{"   ", ""},
		{"lrwxrwxrwx a/b 0 2026-08-11 21:43 shortcut -> nested/data.txt", ""},
		{"lrwxrwxrwx a/b 0 2026-08-11 21:43 dir/up -> ../sibling", ""},
		{"-rw-r--r-- a/b 1 2026-08-11 21:43 ../escape.txt", "Daytona syncOut refusing tarball member that escapes the extraction dir: ../escape.txt"},
		{"-rw-r--r-- a/b 1 2026-08-11 21:43 /etc/passwd", "Daytona syncOut refusing tarball member that escapes the extraction dir: /etc/passwd"},
		{"lrwxrwxrwx a/b 0 2026-08-11 21:43 evil -> ../../outside.txt", "Daytona syncOut refusing tarball link whose target escapes the extraction dir: evil -> ../../outside.txt"},
		{"lrwxrwxrwx a/b 0 2026-08-11 21:43 abs -> /etc", "Daytona syncOut refusing tarball link whose target escapes the extraction dir: abs -> /etc"},
		{"lrwxrwxrwx a/b 0 2026-08-11 21:43 evil -> decoy -> ../../outside.txt", "Daytona syncOut refusing unparseable or ambiguous symlink entry: lrwxrwxrwx a/b 0 2026-08-11 21:43 evil -> decoy -> ../../outside.txt"},
		{"hrw-r--r-- a/b 0 2026-08-11 21:43 h link to ../../x", "Daytona syncOut refusing tarball link whose target escapes the extraction dir: h -> ../../x"},
		{"hrw-r--r-- a/b 0 2026-08-11 21:43 no delimiter", "Daytona syncOut refusing unparseable or ambiguous hardlink entry: hrw-r--r-- a/b 0 2026-08-11 21:43 no delimiter"},
		{"crw-rw-rw- root/root 1,3 2026-08-11 21:43 dev/null", "Daytona syncOut refusing tarball with an unparseable entry listing: crw-rw-rw- root/root 1,3 2026-08-11 21:43 dev/null"},
	}
	for _, tt := range tests {
		err := checkListingLine(tt.line)
		if tt.err == "" {
			assert.NoError(t, err, tt.line)
			continue
		}
		assert.EqualError(t, err, tt.err)
		var unsafe *UnsafeArchiveError
		assert.ErrorAs(t, err, &unsafe)
	}
}

// The listing columns must print what GNU tar's `tar -tvf` prints, field
// for field, so that the plugin's rules see the same lines; checked against
// the tar on this machine when it is GNU tar.
func TestGNUListingMatchesGNUTar(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("tar", "--version").Output()
	if err != nil || !strings.Contains(string(out), "GNU tar") {
		t.Skip("GNU tar is not installed")
	}
	mtime := time.Date(2026, 8, 11, 21, 43, 7, 0, time.UTC)
	headers := []*tar.Header{
		{Typeflag: tar.TypeReg, Name: "./AGENTS.md", Mode: 0o644, Size: 3, Uname: "daytona", Gname: "daytona", Uid: 1000, Gid: 1000, ModTime: mtime},
		{Typeflag: tar.TypeReg, Name: "./root-owned.txt", Mode: 0o4755, Size: 0, Uid: 0, Gid: 0, ModTime: mtime},
		{Typeflag: tar.TypeDir, Name: "./nested/", Mode: 0o1777, Uname: "u", Gname: "g", ModTime: mtime},
		{Typeflag: tar.TypeSymlink, Name: "./shortcut", Linkname: "nested/data.txt", Mode: 0o777, Uname: "u", Gname: "g", ModTime: mtime},
		{Typeflag: tar.TypeLink, Name: "./copy.txt", Linkname: "./AGENTS.md", Mode: 0o644, Uname: "u", Gname: "g", ModTime: mtime},
		{Typeflag: tar.TypeFifo, Name: "./pipe", Mode: 0o600, Uname: "u", Gname: "g", ModTime: mtime},
		{Typeflag: tar.TypeChar, Name: "./null", Mode: 0o666, Uname: "root", Gname: "root", Devmajor: 1, Devminor: 3, ModTime: mtime},
		{Typeflag: tar.TypeReg, Name: "./spaced name -> arrow", Mode: 0o2640, Size: 1, Uname: "u", Gname: "g", ModTime: mtime},
		{Typeflag: tar.TypeReg, Name: "./ctl\n\t\\x\x01é", Mode: 0o600, Size: 0, Uname: "u", Gname: "g", ModTime: mtime},
		{Typeflag: tar.TypeReg, Name: "./wide", Mode: 0o644, Size: 12345, Uname: "a-long-user-name", Gname: "a-long-group", ModTime: mtime},
		{Typeflag: tar.TypeReg, Name: "./after-wide", Mode: 0o644, Size: 1, Uname: "u", Gname: "g", ModTime: mtime},
		{Typeflag: tar.TypeReg, Name: "./numeric", Mode: 0o644, Size: 7, Uid: 1001, Gid: 1001, ModTime: mtime},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range headers {
		require.NoError(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	path := filepath.Join(t.TempDir(), "a.tar")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	cmd := exec.Command("tar", "-tvf", path)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	listing, err := cmd.Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimRight(string(listing), "\n"), "\n")
	require.Len(t, lines, len(headers))
	// Space for space: the plugin quotes whole lines in its refusals, and
	// tar's columns widen with the lines before.
	cols := newListingColumns()
	cols.loc = time.UTC
	for i, h := range headers {
		assert.Equal(t, lines[i], cols.line(h))
	}
}
