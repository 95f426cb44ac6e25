package sync

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
	"github.com/paperclipai/daytona-worker/daytona/emulator/emulatortest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a sandbox in an emulator, its workspace folder and a host folder.
type env struct {
	t         testing.TB
	emu       *emulatortest.Env
	client    *daytona.Client
	tb        *daytona.Toolbox
	sandboxID string
	remoteDir string // the workspace, an absolute path (the emulator's sandboxes are host folders)
	host      string // a host folder for sources and targets
	tracer    *recordingTracer
}

func newEnv(t testing.TB) *env {
	t.Helper()
	emu := emulatortest.Start(t, emulator.Options{StepDelay: emulator.Synchronous})
	c, err := daytona.New(daytona.Config{APIKey: emu.APIKey, APIURL: emu.APIURL})
	require.NoError(t, err)
	ctx := context.Background()
	sb, err := c.CreateAndWait(ctx, daytona.CreateParams{}, time.Minute)
	require.NoError(t, err)
	tb := c.Toolbox(sb)
	home, err := tb.WorkDir(ctx)
	require.NoError(t, err)
	remote := filepath.Join(home, "paperclip-workspace")
	require.NoError(t, tb.CreateFolder(ctx, remote, "755"))
	return &env{t: t, emu: emu, client: c, tb: tb, sandboxID: sb.ID, remoteDir: remote, host: t.TempDir(), tracer: &recordingTracer{}}
}

func (e *env) config() Config {
	return Config{Sandbox: e.tb, RemoteDir: e.remoteDir, TimeoutSeconds: 60, Tracer: e.tracer, SandboxID: e.sandboxID}
}

// manifestPath is where the sandbox keeps a target's manifest (the
// emulator's sandbox home, $HOME there, holds the workspace).
func (e *env) manifestPath(target string) string {
	return filepath.Join(filepath.Dir(e.remoteDir), manifestDir, manifestName(target))
}

// manifestOf reads a mapping's manifest as a sync would (nil when there is
// none it would use).
func (e *env) manifestOf(m Mapping) map[string]entryState {
	b, err := os.ReadFile(e.manifestPath(m.TargetPath))
	if err != nil {
		return nil
	}
	return parseManifest(string(b), identityOf(e.sandboxID, m), m.FollowSymlinks || m.Kind == KindFile)
}

// write creates a host file (and its folders) below the host folder.
func (e *env) write(rel, content string, mode os.FileMode) string {
	e.t.Helper()
	p := filepath.Join(e.host, rel)
	require.NoError(e.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(e.t, os.WriteFile(p, []byte(content), mode))
	require.NoError(e.t, os.Chmod(p, mode))
	return p
}

// remote is a path in the workspace.
func (e *env) remote(rel string) string { return filepath.Join(e.remoteDir, rel) }

// scratchLeft lists reserved scratch names left in the workspace root.
func (e *env) scratchLeft() []string {
	e.t.Helper()
	m, err := filepath.Glob(filepath.Join(e.remoteDir, scratchPrefix+"*"))
	require.NoError(e.t, err)
	return m
}

type recordedSpan struct {
	name       string
	attributes map[string]any
	failed     bool
	ended      bool
}

type recordingTracer struct {
	mu    stdsync.Mutex
	spans []*recordedSpan
}

func (r *recordingTracer) StartSpan(name string, attrs map[string]any, _ time.Time) Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &recordedSpan{name: name, attributes: map[string]any{}}
	for k, v := range attrs {
		s.attributes[k] = v
	}
	r.spans = append(r.spans, s)
	return &recSpan{r: r, s: s}
}

func (r *recordingTracer) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{}
	for _, s := range r.spans {
		out = append(out, s.name)
	}
	return out
}

type recSpan struct {
	r *recordingTracer
	s *recordedSpan
}

func (s *recSpan) SetAttribute(k string, v any) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.s.attributes[k] = v
}

func (s *recSpan) SetError() {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.s.failed = true
}

func (s *recSpan) End(time.Time) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.s.ended = true
}

// workspacePaths keeps the paths below the workspace (an upload's files,
// not the manifests beside them).
func workspacePaths(e *env, paths []string) []string {
	var out []string
	for _, p := range paths {
		if strings.HasPrefix(p, e.remoteDir+"/") {
			out = append(out, p)
		}
	}
	return out
}
