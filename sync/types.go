package sync

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/paperclipai/daytona-worker/daytona"
)

// Mapping kinds.
const (
	KindFile      = "file"
	KindDirectory = "directory"
)

// Mapping is one source → target transfer. For sync in the source is a host
// path and the target a sandbox path; for sync out the reverse.
type Mapping struct {
	SourcePath string
	TargetPath string
	Kind       string
	// Mode is the POSIX mode the target must end with (nil: none given).
	Mode           *int64
	Exclude        []string
	FollowSymlinks bool
	// Access and WritablePath are advisory; sync never reads them.
	Access       string
	WritablePath *string
}

// PostUploadCommand is run verbatim in the sandbox after an operation's
// files landed.
type PostUploadCommand struct {
	Command string
	Cwd     *string
	// TimeoutMs overrides the call's timeout for this command.
	TimeoutMs *float64
}

// Operation is one ordered unit of sync work.
type Operation struct {
	ID                 string
	Files              []Mapping
	PostUploadCommands []PostUploadCommand
}

// Result is the accounting of one operation, as the plugin reports it.
type Result struct {
	OperationID      string
	FilesTransferred int64
	BytesTransferred int64
}

// Sandbox is what sync needs of a sandbox's toolbox; *daytona.Toolbox
// implements it.
type Sandbox interface {
	Execute(ctx context.Context, req daytona.ExecuteRequest) (*daytona.ExecuteResponse, error)
	UploadFiles(ctx context.Context, files []daytona.Upload) ([]daytona.UploadResult, error)
	DownloadFiles(ctx context.Context, files []daytona.Download) ([]daytona.DownloadResult, error)
	SetFilePermissions(ctx context.Context, path string, p daytona.Permissions) error
	DeleteFile(ctx context.Context, path string, recursive bool) error
}

var _ Sandbox = (*daytona.Toolbox)(nil)

// Config is what one sync call works with.
type Config struct {
	Sandbox Sandbox
	// RemoteDir is the workspace root in the sandbox: the confinement root
	// and the home of every reserved scratch name.
	RemoteDir string
	// TimeoutSeconds bounds every sandbox command and transfer (the plugin's
	// toTimeoutSeconds(config.timeoutMs)).
	TimeoutSeconds int
	// Tracer receives the plugin's spans; nil records none.
	Tracer Tracer
	// NewID returns a fresh UUID for scratch names; default uuid.NewString.
	NewID func() string
	// SandboxID names the sandbox in the manifests that incremental sync in
	// keeps there (see the package doc): a sync in then sends only what
	// changed since the last one, on either side. Empty makes every sync in
	// a full one, and writes no manifest.
	SandboxID string
	// Now is the clock for span timings; default time.Now.
	Now func() time.Time
	// RacyClock tells when a sync starts, to find host files changed too
	// recently for their timestamps to be trusted (see racySince); default
	// time.Now. It is separate from Now, which tests fake for span timings,
	// because it is compared with the kernel's file times.
	RacyClock func() time.Time
	// Local says the sandbox's toolbox is on this machine (loopback): a
	// directory's tar is then stored in its gzip stream, not compressed,
	// since compressing can only move CPU time from one process of this
	// machine to another. Elsewhere the level follows the upload's pace.
	Local bool
	// FileErrorText words a failed download of one file in sync's own
	// messages; the worker passes its wording of Daytona's errors. Default
	// err.Error().
	FileErrorText func(err error) string
}

func (c *Config) defaults() {
	if c.NewID == nil {
		c.NewID = uuid.NewString
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.RacyClock == nil {
		c.RacyClock = time.Now
	}
	if c.Tracer == nil {
		c.Tracer = noTracer{}
	}
	if c.FileErrorText == nil {
		c.FileErrorText = func(err error) string { return err.Error() }
	}
}

// transferContext bounds one bulk upload or download by the call's timeout,
// as the SDK's timeout argument bounds the whole request.
func (c *Config) transferContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.TimeoutSeconds <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout())
}

// timeout is the per-command timeout as a duration.
func (c *Config) timeout() time.Duration {
	return time.Duration(c.TimeoutSeconds) * time.Second
}

// scratchPrefix is the reserved stem of every temp, snapshot and tarball the
// transfer leaves in the sandbox or beside a host target. The host's
// workspace wipe keeps entries with this prefix, so it must not change.
const scratchPrefix = ".paperclip-upload"

// scratchName is .paperclip-upload-<uuid><suffix>.
func (c *Config) scratchName(suffix string) string {
	return scratchPrefix + "-" + c.NewID() + suffix
}

// WritableDirs is the plugin's advisory writable set for a sync in: for
// every mapping with access "rw", its writablePath, or else the parent of
// its target (a staging tarball names the folder it is extracted into).
// Directories come once each, in order. Sync itself never reads it.
func WritableDirs(ops []Operation) []string {
	var dirs []string
	seen := map[string]bool{}
	for _, op := range ops {
		for _, m := range op.Files {
			if m.Access != "rw" {
				continue
			}
			dir := nodeDirname(m.TargetPath)
			if m.WritablePath != nil {
				dir = *m.WritablePath
			}
			if !seen[dir] {
				seen[dir] = true
				dirs = append(dirs, dir)
			}
		}
	}
	return dirs
}
