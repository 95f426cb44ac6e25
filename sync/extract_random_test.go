package sync

import (
	"archive/tar"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

// The extractor reads a sandbox-authored archive on a goroutine of its own,
// where a panic would take the worker down. Random archives over a few
// names that collide, nest and climb (members replacing one another, links
// to links, links that escape, members below links) must each be extracted
// or refused, never panic, and leave nothing beside the target but the
// target itself (no staging folder). make test plays 300 archives, make
// test-long 1000.
func TestExtractRandomArchivesNeverPanicOrLeaveStaging(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b", "a/b", "a/b/c", ".", "./a", "a/", "b/a", "c", "a/c", "b/b", "./", "a//b"}
	links := []string{"a", "b", "..", "a/..", "../x", ".", "a/b", "/etc", "c/../a", "b/..", "a/../..", ""}
	types := []byte{tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo}
	for seed := range uint64(testutil.Seeds(300, 1000)) {
		r := rand.New(rand.NewPCG(seed, 1))
		members := make([]member, 1+r.IntN(8))
		for i := range members {
			m := member{typ: types[r.IntN(len(types))], name: names[r.IntN(len(names))], mode: 0o700 | int64(r.IntN(0o1000))}
			if m.typ != tar.TypeDir && (m.name == "a/" || m.name == "./") {
				m.name = "a" // tar.Writer refuses a trailing slash on anything else
			}
			switch m.typ {
			case tar.TypeSymlink, tar.TypeLink:
				m.link = links[r.IntN(len(links))]
			case tar.TypeReg:
				m.body = "x"
			}
			members[i] = m
		}
		dir := t.TempDir()
		target := filepath.Join(dir, "target")
		if r.IntN(2) == 0 {
			// An existing target, for the merge.
			require.NoError(t, os.MkdirAll(filepath.Join(target, "a", "b"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(target, "b"), []byte("y"), 0o644))
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("seed %d: panic %v extracting %+v", seed, p, members)
				}
			}()
			_ = extractBytes(t, buildTar(t, members), target)
		}()
		for _, p := range listDir(t, dir) {
			if strings.HasPrefix(filepath.Base(p), scratchPrefix) {
				t.Fatalf("seed %d: staging left at %s after %+v", seed, p, members)
			}
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			require.Equal(t, "target", e.Name(), "seed %d: written beside the target", seed)
		}
	}
}
