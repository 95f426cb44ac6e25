package sync

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// benchTree writes files of size bytes each (incompressible) below a temp folder.
func benchTree(b *testing.B, files, size int) string {
	b.Helper()
	root := b.TempDir()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*131 + i>>9)
	}
	for i := 0; i < files; i++ {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkPackTree is the worker's side of a directory sync in: the walk,
// the tar and the stored gzip stream, into a sink (2,000 files of 100 KiB).
func BenchmarkPackTree(b *testing.B) {
	root := benchTree(b, 2000, 100<<10)
	b.SetBytes(2000 * 100 << 10)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		entries, err := walkHostTree(root, nil, false)
		if err != nil {
			b.Fatal(err)
		}
		g := newAdaptiveGzip(io.Discard, time.Now)
		g.ctl.force = storeOnly
		if err := writeTar(g, entries, nil, neverRacy); err != nil {
			b.Fatal(err)
		}
		if err := g.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExtractTree is the worker's side of a directory sync out: the
// checks and the staged extraction of a tarball held in memory (2,000
// files of 100 KiB), into a new target. Each iteration also times GNU tar
// extracting the same archive (when installed), so the ratio is read under
// the same disk load.
func BenchmarkExtractTree(b *testing.B) {
	root := benchTree(b, 2000, 100<<10)
	entries, err := walkHostTree(root, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	var archive bytes.Buffer
	if err := writeTar(&archive, entries, nil, neverRacy); err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	tarPath := filepath.Join(b.TempDir(), "a.tar")
	if err := os.WriteFile(tarPath, archive.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	_, gnuErr := exec.LookPath("tar")
	var gnu time.Duration
	b.SetBytes(int64(archive.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if gnuErr == nil {
			b.StopTimer()
			target := filepath.Join(out, fmt.Sprint("gnu", i))
			if err := os.Mkdir(target, 0o755); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if out, err := exec.Command("tar", "-xf", tarPath, "-C", target).CombinedOutput(); err != nil {
				b.Fatal(err, string(out))
			}
			gnu += time.Since(start)
			if err := os.RemoveAll(target); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		target := filepath.Join(out, fmt.Sprint(i))
		x, _, err := newExtractor(target, ".stage")
		if err != nil {
			b.Fatal(err)
		}
		if err := x.read(bytes.NewReader(archive.Bytes())); err != nil {
			b.Fatal(err)
		}
		if err := x.commit(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(target); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if gnu > 0 {
		b.ReportMetric(float64(archive.Len())*float64(b.N)/1e6/gnu.Seconds(), "MB/s-gnu-tar")
	}
}
