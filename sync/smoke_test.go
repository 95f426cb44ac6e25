package sync

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/internal/testutil"
)

func TestSmokeRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	src := filepath.Join(e.host, "src")
	e.write("src/nested/data.txt", "hello world", 0o644)
	e.write("src/secret", "top-secret", 0o600)
	require.NoError(t, os.Symlink("nested/data.txt", filepath.Join(src, "shortcut")))
	e.write("one.txt", "plain", 0o644)

	res, err := In(ctx, e.config(), []Operation{{ID: "op", Files: []Mapping{
		{SourcePath: src, TargetPath: e.remote("proj"), Kind: KindDirectory},
		{SourcePath: filepath.Join(e.host, "one.txt"), TargetPath: e.remote("one.txt"), Kind: KindFile, Mode: testutil.Ptr(int64(0o600))},
	}}})
	require.NoError(t, err)
	t.Logf("%+v spans %v", res, e.tracer.names())
	b, err := os.ReadFile(e.remote("proj/nested/data.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(b))
	fi, err := os.Stat(e.remote("one.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Empty(t, e.scratchLeft())

	restored := filepath.Join(e.host, "restored")
	res, err = Out(ctx, e.config(), []Operation{{ID: "out", Files: []Mapping{
		{SourcePath: e.remote("proj"), TargetPath: restored, Kind: KindDirectory},
		{SourcePath: e.remote("one.txt"), TargetPath: filepath.Join(e.host, "back.txt"), Kind: KindFile, Mode: testutil.Ptr(int64(0o640))},
	}}})
	require.NoError(t, err)
	t.Logf("%+v", res)
	b, err = os.ReadFile(filepath.Join(restored, "nested/data.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(b))
	link, err := os.Readlink(filepath.Join(restored, "shortcut"))
	require.NoError(t, err)
	assert.Equal(t, "nested/data.txt", link)
	fi, err = os.Stat(filepath.Join(restored, "secret"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Empty(t, e.scratchLeft())
}
