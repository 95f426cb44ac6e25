package sync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/paperclipai/daytona-worker/daytona"
)

// Out runs a sync out: sandbox → host, operation by operation. Every
// mapping is checked before anything moves; the first failure ends the call.
func Out(ctx context.Context, cfg Config, ops []Operation) ([]Result, error) {
	cfg.defaults()
	if err := cfg.validateOut(ops); err != nil {
		return nil, err
	}
	results := make([]Result, 0, len(ops))
	for _, op := range ops {
		res := Result{OperationID: op.ID}
		var files, dirs []Mapping
		for _, m := range op.Files {
			switch m.Kind {
			case KindFile:
				files = append(files, m)
			case KindDirectory:
				dirs = append(dirs, m)
			}
		}
		n, b, err := cfg.outFiles(ctx, files)
		if err != nil {
			return nil, err
		}
		res.FilesTransferred += n
		res.BytesTransferred += b
		for _, m := range dirs {
			n, b, err := cfg.outDir(ctx, m)
			if err != nil {
				return nil, err
			}
			res.FilesTransferred += n
			res.BytesTransferred += b
		}
		results = append(results, res)
	}
	return results, nil
}

// tempRenameError is the plugin's failed rename of a file's temp, made
// beside the target (path.dirname: "." for an empty one), onto target.
func (c *Config) tempRenameError(target string, errno syscall.Errno) error {
	return nodeRenameError(filepath.Join(nodeDirname(target), c.scratchName("")), target, errno)
}

func (c *Config) validateOut(ops []Operation) error {
	remoteDir := c.RemoteDir
	for _, op := range ops {
		for _, m := range op.Files {
			if m.Kind != KindFile && m.Kind != KindDirectory {
				continue
			}
			if err := checkConfined(remoteDir, m.SourcePath, "source"); err != nil {
				return err
			}
			if m.TargetPath == "" {
				// Worded as the plugin fails on it: the rename of a file's
				// temp (made in "."), the mkdir of a folder.
				if m.Kind == KindFile {
					return c.tempRenameError("", syscall.ENOENT)
				}
				return nodeFSError("mkdir", "", syscall.ENOENT)
			}
			// A file lands by rename, which replaces a symlink rather than
			// follow it; a folder is made by a recursive mkdir, which
			// follows one.
			stat := os.Stat
			if m.Kind == KindFile {
				stat = os.Lstat
			}
			fi, err := stat(m.TargetPath)
			switch {
			case m.Kind == KindFile && strings.HasSuffix(m.TargetPath, "/"):
				// rename(2) of a file onto a name with a trailing slash,
				// whatever is there.
				return c.tempRenameError(m.TargetPath, syscall.ENOTDIR)
			case err != nil:
			case m.Kind == KindFile && fi.IsDir():
				// Worded as the plugin's rename of its temp onto the
				// folder fails.
				return c.tempRenameError(m.TargetPath, syscall.EISDIR)
			case m.Kind == KindDirectory && !fi.IsDir():
				return nodeFSError("mkdir", m.TargetPath, syscall.EEXIST)
			}
		}
	}
	return nil
}

// canonicalizer is the guard scripts' preamble: _pc_resolve is realpath,
// else readlink -f (exit 40 without either), _pc_root the resolved remote
// dir (exit 41 when it cannot be resolved).
func canonicalizer(remoteDir string) []string {
	return []string{
		`if command -v realpath >/dev/null 2>&1; then _pc_resolve() { realpath -- "$1"; };`,
		`elif command -v readlink >/dev/null 2>&1; then _pc_resolve() { readlink -f -- "$1"; };`,
		`else echo "no path canonicalizer available"; exit 40; fi;`,
		`_pc_root=$(_pc_resolve ` + shellQuote(remoteDir) + `) || { echo "cannot resolve root"; exit 41; };`,
	}
}

const guardLabel = "outbound symlink-escape guard"

// outFiles fetches a batch of file mappings: one guard script resolves each
// source, confines it under the remote dir, re-checks right before copying
// that it is a regular file and no symlink, and copies it to a reserved
// snapshot; one bulk download fetches the snapshots into temps beside the
// targets; only when every download succeeded does each temp get its mode
// and get renamed onto its target.
func (c *Config) outFiles(ctx context.Context, mappings []Mapping) (int64, int64, error) {
	if len(mappings) == 0 {
		return 0, 0, nil
	}
	snapshots := make([]string, len(mappings))
	lines := canonicalizer(c.RemoteDir)
	for i, m := range mappings {
		snapshots[i] = nodeJoin(c.RemoteDir, c.scratchName(""))
		lines = append(lines,
			`_pc_real=$(_pc_resolve `+shellQuote(m.SourcePath)+`) || { echo "ESCAPE"; exit 42; };`,
			`case "$_pc_real/" in "$_pc_root"/*) : ;; *) echo "ESCAPE"; exit 42 ;; esac;`,
			`[ -L "$_pc_real" ] && { echo "REPLACED"; exit 44; };`,
			`[ -f "$_pc_real" ] || { echo "NOTREG"; exit 45; };`,
			`cp -- "$_pc_real" `+shellQuote(snapshots[i])+` || { echo "snapshot copy failed"; exit 43; };`,
		)
	}
	if _, err := c.run(ctx, shScript(strings.Join(lines, "\n")), guardLabel); err != nil {
		// The plugin leaves the snapshots copied before the failing source.
		c.removeScratch(ctx, snapshots)
		return 0, 0, err
	}

	temps := make([]*os.File, len(mappings))
	cleanup := func() {
		for _, f := range temps {
			if f != nil {
				f.Close()
				_ = os.Remove(f.Name())
			}
		}
		c.removeScratch(ctx, snapshots)
	}
	for i, m := range mappings {
		// path.dirname, as the plugin takes it ("/a/b/" is in "/a").
		dir := nodeDirname(m.TargetPath)
		if err := nodeMkdirAll(dir); err != nil {
			cleanup()
			return 0, 0, err
		}
		// A temp for a file with a mode is private until it has that mode
		// (the plugin's temp is world-readable while the bytes arrive).
		perm := os.FileMode(0o666)
		if m.Mode != nil {
			perm = 0o600
		}
		temp := filepath.Join(dir, c.scratchName(""))
		f, err := os.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
		if err != nil {
			cleanup()
			return 0, 0, nodeFSError("open", temp, pathErrno(err))
		}
		temps[i] = f
	}
	downloads := make([]daytona.Download, len(mappings))
	for i := range mappings {
		downloads[i] = daytona.Download{Path: snapshots[i], Writer: temps[i]}
	}
	results, err := withSpan(c, spanOptions{
		name: spanTransfer, wallMsAttr: attrTransferWallMs,
		attributes: map[string]any{attrTransferGuardCount: 1, attrTransferDirection: directionOutbound},
	}, func() ([]daytona.DownloadResult, error) {
		tctx, cancel := c.transferContext(ctx)
		defer cancel()
		return c.Sandbox.DownloadFiles(tctx, downloads)
	})
	if err != nil {
		cleanup()
		return 0, 0, err
	}
	for i, m := range mappings {
		var rerr error
		if i < len(results) {
			rerr = results[i].Err
		} else {
			rerr = errors.New("no response returned")
		}
		if rerr != nil {
			cleanup()
			return 0, 0, fmt.Errorf("Daytona syncOut download failed for %s: %s", m.SourcePath, c.FileErrorText(rerr))
		}
	}
	var total int64
	for i, m := range mappings {
		f := temps[i]
		if m.Mode != nil {
			if err := f.Chmod(os.FileMode(*m.Mode&0o777) | specialBits(*m.Mode)); err != nil {
				cleanup()
				return 0, 0, nodeFSError("chmod", f.Name(), pathErrno(err))
			}
		}
		fi, err := f.Stat()
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			cleanup()
			return 0, 0, err
		}
		total += fi.Size()
		// rename(2) itself: os.Rename says EEXIST for a folder target, the
		// kernel (and so Node) EISDIR.
		if err := syscall.Rename(f.Name(), m.TargetPath); err != nil {
			cleanup()
			return 0, 0, nodeRenameError(f.Name(), m.TargetPath, err)
		}
		temps[i] = nil
	}
	c.removeScratch(ctx, snapshots)
	return int64(len(mappings)), total, nil
}

// nodeMkdirAll is Node's fs.mkdir(dir, {recursive: true}): dir and its
// missing parents, a failure worded as Node words it, naming dir itself
// (EEXIST when dir is there but is not a folder; os.MkdirAll says ENOTDIR).
func nodeMkdirAll(dir string) error {
	err := os.MkdirAll(dir, 0o777)
	if err == nil {
		return nil
	}
	errno := pathErrno(err)
	if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
		errno = syscall.EEXIST
	}
	return nodeFSError("mkdir", dir, errno)
}

func specialBits(mode int64) os.FileMode {
	var fm os.FileMode
	if mode&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// outDir fetches one directory mapping: the source's real path must stay
// under the remote dir (one guard round trip), the sandbox tars it (a
// second), and the download streams into an extractor that checks every
// member and stages it beside the target; the staged tree replaces or
// merges into the target only when the whole archive passed.
func (c *Config) outDir(ctx context.Context, m Mapping) (int64, int64, error) {
	guard := append(canonicalizer(c.RemoteDir),
		"for _pc_p in "+shellQuote(m.SourcePath)+"; do",
		`  _pc_real=$(_pc_resolve "$_pc_p") || { echo "ESCAPE:$_pc_p"; exit 42; };`,
		`  case "$_pc_real/" in "$_pc_root"/*) : ;; *) echo "ESCAPE:$_pc_p"; exit 42 ;; esac;`,
		"done",
	)
	if _, err := c.run(ctx, shScript(strings.Join(guard, "\n")), guardLabel); err != nil {
		return 0, 0, err
	}

	remoteTar := nodeJoin(c.RemoteDir, c.scratchName(".tar"))
	names := remoteTar + ".names"
	excludes := []string{"--exclude '._*'", "--exclude " + shellQuote("./"+nodeBase(names))}
	for _, e := range m.Exclude {
		excludes = append(excludes, "--exclude "+shellQuote(e))
	}
	follow := ""
	if m.FollowSymlinks {
		follow = "-h "
	}
	script := strings.Join([]string{
		"set -e",
		"cd " + shellQuote(m.SourcePath),
		"trap " + shellQuote("rm -f -- "+shellQuote(names)) + " EXIT",
		"find . -mindepth 1 -maxdepth 1 -print0 > " + shellQuote(names),
		"tar -c --no-xattrs " + follow + strings.Join(excludes, " ") + " -f " + shellQuote(remoteTar) + " --null -T " + shellQuote(names),
	}, "; ")
	deleteTar := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout()+cleanupSlack)
		defer cancel()
		_ = c.Sandbox.DeleteFile(dctx, remoteTar, false)
	}
	if _, err := c.run(ctx, shScript(script), "syncOut tar"); err != nil {
		deleteTar()
		return 0, 0, err
	}
	defer deleteTar()

	x, created, err := newExtractor(m.TargetPath, c.scratchName(""))
	if err != nil {
		return 0, 0, err
	}
	defer x.cleanup()
	bytes, err := withSpan(c, spanOptions{
		name: spanTransfer, wallMsAttr: attrTransferWallMs,
		attributes: map[string]any{attrTransferGuardCount: 2, attrTransferDirection: directionOutbound},
	}, func() (int64, error) {
		return c.downloadInto(ctx, remoteTar, m.SourcePath, x)
	})
	if err == nil {
		err = x.commit()
	}
	if err != nil {
		x.cleanup()
		removeCreated(created)
		return 0, 0, err
	}
	return countHostFiles(m.TargetPath, m.Exclude), bytes, nil
}

// downloadInto streams the sandbox's tarball into the extractor.
func (c *Config) downloadInto(ctx context.Context, remoteTar, source string, x *extractor) (int64, error) {
	// A few MiB between the download and the extractor keep bytes
	// arriving while the extractor creates files.
	pr, pw := newBufferedPipe(downloadChunks, downloadChunkSize)
	extracted := make(chan error, 1)
	go func() {
		err := x.read(pr)
		if err == nil {
			// Trailing bytes after the end of the archive still belong
			// to the download.
			_, err = io.Copy(io.Discard, pr)
			if err != nil {
				err = &archiveReadError{err: err}
			}
		}
		pr.CloseWithError(errExtractEnded)
		extracted <- err
	}()
	tctx, cancel := c.transferContext(ctx)
	defer cancel()
	results, derr := c.Sandbox.DownloadFiles(tctx, []daytona.Download{{Path: remoteTar, Writer: pw}})
	var n int64
	if derr == nil {
		switch {
		case len(results) == 0:
			derr = fmt.Errorf("Daytona syncOut directory download failed for %s: no response returned", source)
		case results[0].Err != nil:
			derr = fmt.Errorf("Daytona syncOut directory download failed for %s: %s", source, c.FileErrorText(results[0].Err))
		default:
			n = results[0].Bytes
		}
	}
	if derr != nil {
		pw.CloseWithError(derr)
	} else {
		pw.Close()
	}
	xerr := <-extracted
	switch {
	case xerr != nil && derr != nil && errors.Is(xerr, derr):
		return 0, derr // the stream broke off; the extractor only saw that
	case xerr != nil:
		return 0, xerr
	case derr != nil:
		return 0, derr
	}
	return n, nil
}

const (
	downloadChunks    = 16
	downloadChunkSize = 256 << 10
)

// errExtractEnded stops a download whose extractor gave up.
var errExtractEnded = errors.New("extraction ended")

// nodeBase is path.posix.basename without a suffix.
func nodeBase(p string) string {
	p = strings.TrimRight(p, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
