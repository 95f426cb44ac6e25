package sync

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/internal/js"
)

// In runs a sync in: host → sandbox, operation by operation. Every mapping
// and working directory is checked before anything moves, so bad input
// changes nothing on either side; the first failure ends the call.
func In(ctx context.Context, cfg Config, ops []Operation) ([]Result, error) {
	cfg.defaults()
	if err := validateIn(cfg.RemoteDir, ops); err != nil {
		return nil, err
	}
	// Taken before any host file is looked at, so that every signature of
	// this sync is taken after it.
	since := racySince(cfg.CacheClock())
	results := make([]Result, 0, len(ops))
	for _, op := range ops {
		var res Result
		res.OperationID = op.ID
		var files, dirs []Mapping
		for _, m := range op.Files {
			switch m.Kind {
			case KindFile:
				files = append(files, m)
			case KindDirectory:
				dirs = append(dirs, m)
			}
		}
		n, b, err := cfg.inFiles(ctx, files, since)
		if err != nil {
			return nil, err
		}
		res.FilesTransferred += n
		res.BytesTransferred += b
		for _, m := range dirs {
			n, b, err := cfg.inDir(ctx, m, since)
			if err != nil {
				return nil, err
			}
			res.FilesTransferred += n
			res.BytesTransferred += b
		}
		if err := cfg.postUpload(ctx, op.PostUploadCommands); err != nil {
			return nil, err
		}
		results = append(results, res)
	}
	return results, nil
}

func validateIn(remoteDir string, ops []Operation) error {
	for _, op := range ops {
		for _, m := range op.Files {
			switch m.Kind {
			case KindFile:
				if err := checkConfined(remoteDir, m.TargetPath, "target"); err != nil {
					return err
				}
				fi, err := os.Stat(m.SourcePath)
				if err != nil {
					return nodeFSError("stat", m.SourcePath, pathErrno(err))
				}
				if fi.IsDir() {
					return errors.New("EISDIR: illegal operation on a directory, read")
				}
				// Anything else is read as the plugin's upload reads it: a
				// device streams (/dev/null gives an empty file), a socket
				// fails to open (ENXIO). A FIFO would block the upload until
				// some writer came, so it is refused (row sync-in-fifo-source).
				if fi.Mode()&os.ModeNamedPipe != 0 {
					return fmt.Errorf("Daytona syncIn source is a named pipe: %s", m.SourcePath)
				}
			case KindDirectory:
				if err := checkConfined(remoteDir, m.TargetPath, "target"); err != nil {
					return err
				}
				fi, err := os.Stat(m.SourcePath)
				if err != nil {
					return nodeFSError("opendir", m.SourcePath, pathErrno(err))
				}
				if !fi.IsDir() {
					return nodeFSError("opendir", m.SourcePath, syscall.ENOTDIR)
				}
			}
		}
		for _, pc := range op.PostUploadCommands {
			if pc.Cwd != nil {
				if err := checkConfined(remoteDir, *pc.Cwd, "cwd"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// filePlan is one file mapping of a batch.
type filePlan struct {
	m    Mapping
	size int64
	sig  hostSig
	raw  string // reserved temp, a direct child of the remote dir
	skip bool   // the sandbox already has it (Cache)
}

// modeKey is the requested mode, or -1 for none.
func modeKey(m Mapping) int64 {
	if m.Mode == nil {
		return -1
	}
	return *m.Mode & 0o7777
}

// inFiles sends a batch of file mappings: one mkdir round trip, one bulk
// upload to reserved temps in the remote dir (so the closing mv is an
// atomic same-file-system rename and an interrupted upload never leaves a
// truncated target), the modes set on the temps, one promote script. since
// is racySince of the sync's start.
func (c *Config) inFiles(ctx context.Context, mappings []Mapping, since int64) (int64, int64, error) {
	if len(mappings) == 0 {
		return 0, 0, nil
	}
	plans := make([]filePlan, len(mappings))
	var parents []string
	seen := map[string]bool{}
	var total int64
	for i, m := range mappings {
		if d := nodeDirname(m.TargetPath); !seen[d] {
			seen[d] = true
			parents = append(parents, d)
		}
		fi, err := os.Stat(m.SourcePath)
		if err != nil {
			return 0, 0, nodeFSError("stat", m.SourcePath, pathErrno(err))
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		plans[i] = filePlan{m: m, size: fi.Size(), raw: nodeJoin(c.RemoteDir, c.scratchName(""))}
		if st != nil {
			plans[i].sig = sigOf(st, '0', true)
		}
		total += fi.Size()
	}

	// Targets the cache says this sandbox already holds, unless changed.
	// A target named by more than one mapping of the batch is always sent:
	// the promote moves each in turn and the last one must win, which
	// skipping one of them (the cache holds only the last) would undo.
	var candidates []string
	candidate := map[string]fileState{}
	if c.Cache != nil {
		named := make(map[string]int, len(plans))
		for _, p := range plans {
			named[p.m.TargetPath]++
		}
		for _, p := range plans {
			if named[p.m.TargetPath] > 1 {
				continue
			}
			if f, ok := c.Cache.file(p.m.TargetPath); ok && f.host == p.sig && f.mode == modeKey(p.m) {
				candidates = append(candidates, p.m.TargetPath)
				candidate[p.m.TargetPath] = f
			}
		}
	}
	mkdirs := make([]string, len(parents))
	for i, d := range parents {
		mkdirs[i] = "mkdir -p " + shellQuote(d)
	}
	cmd := strings.Join(mkdirs, " && ")
	if len(candidates) > 0 {
		cmd += " && { " + pathsListingCommand(candidates) + "; }"
	}
	out, err := withSpan(c, spanOptions{name: spanEnsureDirectory}, func() (string, error) {
		return c.run(ctx, cmd, "syncIn mkdir")
	})
	if err != nil {
		return 0, 0, err
	}
	if len(candidates) > 0 {
		listing := parseListing(out)
		for i := range plans {
			p := &plans[i]
			f, ok := candidate[p.m.TargetPath]
			if !ok {
				continue
			}
			p.skip = f.unchanged(p.sig, listing[p.m.TargetPath], func() (uint64, error) {
				return contentSum(p.m.SourcePath, true)
			})
			if settled := f.settled(since); p.skip && settled != f.entryState {
				c.Cache.setFile(p.m.TargetPath, fileState{entryState: settled, mode: f.mode}, true)
			}
		}
	}

	var uploads []daytona.Upload
	var sources []*lazyFile
	var scratch, promoted []string
	sent := make([]*lazyFile, len(plans))
	for i, p := range plans {
		if p.skip {
			continue
		}
		f := &lazyFile{path: p.m.SourcePath}
		if c.Cache != nil && p.sig.racy(since) {
			f.sum = crc64.New(crcTable())
		}
		sent[i] = f
		sources = append(sources, f)
		uploads = append(uploads, daytona.Upload{Path: p.raw, Reader: f})
		scratch = append(scratch, p.raw)
		promoted = append(promoted, p.m.TargetPath)
	}
	fail := func(err error) (int64, int64, error) {
		c.removeScratch(ctx, scratch)
		for _, t := range promoted {
			c.Cache.setFile(t, fileState{}, false)
		}
		return 0, 0, err
	}
	err = withSpanErr(c, spanOptions{
		name: spanTransfer, wallMsAttr: attrTransferWallMs,
		attributes: map[string]any{attrTransferGuardCount: 1, attrTransferDirection: directionInbound},
	}, func() error {
		defer closeAll(sources)
		if len(uploads) == 0 {
			return nil
		}
		tctx, cancel := c.transferContext(ctx)
		defer cancel()
		_, err := c.Sandbox.UploadFiles(tctx, uploads)
		return uploadError(err, sources)
	})
	if err != nil {
		return fail(err)
	}
	for _, p := range plans {
		if !p.skip && p.m.Mode != nil {
			if err := c.Sandbox.SetFilePermissions(ctx, p.raw, daytona.Permissions{Mode: octalMode(*p.m.Mode)}); err != nil {
				return fail(err)
			}
		}
	}
	if len(promoted) == 0 {
		// Nothing to move, so no round trip; the span still marks the
		// step, as the plugin's trace of a file batch always has
		// ensureDirectory, transfer and promote.
		_ = withSpanErr(c, spanOptions{name: spanPromote}, func() error { return nil })
		return int64(len(mappings)), total, nil
	}
	lines := make([]string, 0, 2*len(plans)+1)
	for _, p := range plans {
		if !p.skip {
			// mv onto a folder, or a link to one, would move the temp into
			// it and report success (the plugin does that); the target must
			// end up as the file.
			qt := shellQuote(p.m.TargetPath)
			lines = append(lines,
				"if [ -L "+qt+" ]; then rm -f "+qt+` || { echo "rename failed"; exit 43; }; elif [ -d `+qt+` ]; then echo "rename failed: target is a directory"; exit 43; fi;`,
				"mv -f "+shellQuote(p.raw)+" "+qt+` || { echo "rename failed"; exit 43; };`)
		}
	}
	if c.Cache != nil {
		lines = append(lines, pathsListingCommand(promoted))
	}
	out, err = withSpan(c, spanOptions{name: spanPromote}, func() (string, error) {
		return c.run(ctx, shScript(strings.Join(lines, "\n")), "syncIn rename")
	})
	if err != nil {
		return fail(err)
	}
	if c.Cache != nil {
		listing := parseListing(out)
		for i, p := range plans {
			if p.skip {
				continue
			}
			sig, ok := listing[p.m.TargetPath]
			st := fileState{entryState: entryState{host: p.sig, sandbox: sig}, mode: modeKey(p.m)}
			if f := sent[i]; f.sum != nil {
				// Only a file read to its end has a digest of what landed.
				st.racy, st.sum = true, f.sum.Sum64()
				ok = ok && f.eof
			}
			c.Cache.setFile(p.m.TargetPath, st, ok)
		}
	}
	return int64(len(mappings)), total, nil
}

// lazyFile opens its file on first read, so a batch of many files holds
// one descriptor at a time. With sum set, it digests what it reads.
type lazyFile struct {
	path string
	f    *os.File
	err  error
	sum  hash.Hash64
	eof  bool
}

func (l *lazyFile) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if l.f == nil {
		f, err := os.Open(l.path)
		if err != nil {
			l.err = nodeFSError("open", l.path, pathErrno(err))
			return 0, l.err
		}
		l.f = f
	}
	n, err := l.f.Read(p)
	if l.sum != nil {
		l.sum.Write(p[:n])
	}
	if err == io.EOF {
		l.f.Close()
		l.f, l.err, l.eof = nil, io.EOF, true
	} else if err != nil {
		l.err = nodeFSError("read", l.path, pathErrno(err))
		err = l.err
	}
	return n, err
}

func closeAll(files []*lazyFile) {
	for _, f := range files {
		if f.f != nil {
			f.f.Close()
			f.f = nil
		}
	}
}

// uploadError prefers a host file's own failure to the upload's account of
// it.
func uploadError(err error, sources []*lazyFile) error {
	if err == nil {
		return nil
	}
	for _, s := range sources {
		var fe *hostFSError
		if errors.As(s.err, &fe) {
			return s.err
		}
	}
	return err
}

// inDir sends one directory mapping: the tree is walked (the pack step),
// the target created (and, with a cache, listed), a gzip tar of the tree,
// or of what changed, streamed into the upload, and one extract script run.
// since is racySince of the sync's start.
func (c *Config) inDir(ctx context.Context, m Mapping, since int64) (int64, int64, error) {
	entries, err := withSpan(c, spanOptions{name: spanPack, wallMsAttr: attrPackWallMs}, func() ([]hostEntry, error) {
		return walkHostTree(m.SourcePath, m.Exclude, m.FollowSymlinks)
	})
	if err != nil {
		return 0, 0, err
	}
	remoteTar := nodeJoin(c.RemoteDir, c.scratchName(".tar.gz"))
	useCache := c.Cache != nil && len(entries) <= maxTreeEntries
	var prev map[string]entryState
	cmd := "mkdir -p " + shellQuote(m.TargetPath)
	if useCache {
		if prev = c.Cache.tree(m.TargetPath); prev != nil {
			cmd += " && { " + treeListingCommand(m.TargetPath, "") + "; }"
		}
	}
	out, err := withSpan(c, spanOptions{name: spanEnsureDirectory}, func() (string, error) {
		return c.run(ctx, cmd, "syncIn mkdir")
	})
	if err != nil {
		return 0, 0, err
	}
	var send []bool
	if prev != nil {
		send = changedEntries(entries, prev, parseListing(out), hostSum)
	}

	var archiveBytes int64
	err = withSpanErr(c, spanOptions{
		name: spanTransfer, wallMsAttr: attrTransferWallMs,
		attributes: map[string]any{attrTransferGuardCount: 1, attrTransferDirection: directionInbound},
	}, func() error {
		var err error
		racyFrom := int64(neverRacy)
		if useCache {
			racyFrom = since
		}
		archiveBytes, err = c.uploadTree(ctx, entries, send, remoteTar, racyFrom)
		return err
	})
	if err == nil {
		out, err = withSpan(c, spanOptions{name: spanExtractTarball}, func() (string, error) {
			return c.run(ctx, shScript(extractScript(remoteTar, m, useCache)), "syncIn extract")
		})
	}
	if err != nil {
		c.removeScratch(ctx, []string{remoteTar})
		c.Cache.setTree(m.TargetPath, nil)
		return 0, 0, err
	}
	if useCache {
		c.Cache.setTree(m.TargetPath, nextTreeState(entries, send, prev, parseListing(out), since))
	}
	return countHostFiles(m.SourcePath, m.Exclude), archiveBytes, nil
}

// changedEntries marks what a sync must send: every entry the cache cannot
// vouch for on both sides, all names of a hard-link group any of whose
// names is sent, and the folders above anything sent (so that tar gives
// them back the mode and time a full extraction would). sum digests a host
// entry as it is now (hostSum), for entries recorded as racy.
func changedEntries(entries []hostEntry, prev map[string]entryState, listing map[string]string, sum func(*hostEntry) (uint64, error)) []bool {
	send := make([]bool, len(entries))
	index := make(map[string]int, len(entries))
	for i := range entries {
		e := &entries[i]
		index[e.rel] = i
		st, ok := prev[e.rel]
		send[i] = !ok || !st.unchanged(e.sig, listing[e.rel], func() (uint64, error) { return sum(e) })
	}
	group := func(i int) int {
		if entries[i].linkOf >= 0 {
			return entries[i].linkOf
		}
		return i
	}
	groupSent := map[int]bool{}
	for i := range entries {
		if send[i] {
			groupSent[group(i)] = true
		}
	}
	for i := range entries {
		if groupSent[group(i)] {
			send[i] = true
		}
	}
	for i, e := range entries {
		if !send[i] {
			continue
		}
		for p := e.rel; ; {
			j := strings.LastIndexByte(p, '/')
			if j < 0 {
				break
			}
			p = p[:j]
			if k, ok := index[p]; ok {
				if send[k] {
					break
				}
				send[k] = true
			}
		}
	}
	return send
}

// nextTreeState is what the cache holds after a successful sync: entries
// sent carry their new sandbox signature (when the listing showed it) and,
// if racy, the digest of what was sent; entries not sent keep theirs, a racy
// one (just verified by its digest) made plain once it no longer is racy.
func nextTreeState(entries []hostEntry, send []bool, prev map[string]entryState, listing map[string]string, since int64) map[string]entryState {
	next := make(map[string]entryState, len(entries))
	for i, e := range entries {
		if send == nil || send[i] {
			if sig, ok := listing[e.rel]; ok {
				next[e.rel] = entryState{host: e.sig, sandbox: sig, racy: e.racy, sum: e.sum}
			}
		} else if st, ok := prev[e.rel]; ok {
			next[e.rel] = st.settled(since)
		}
	}
	return next
}

// hostSum digests what a tree entry holds now: a regular file's content
// (opened as the walk reached it) or a symlink's target (as the walk read
// it, after the signature it is checked with). Other kinds are never racy.
func hostSum(e *hostEntry) (uint64, error) {
	switch e.kind {
	case tar.TypeReg:
		return contentSum(e.abs, e.sig.followedLinks)
	case tar.TypeSymlink:
		return linkSum(e.link), nil
	}
	return 0, fmt.Errorf("Daytona syncIn cannot digest %s", e.abs)
}

const (
	uploadChunks    = 8
	uploadChunkSize = 256 << 10
)

// errUploadEnded tells the tar producer that the upload is over.
var errUploadEnded = errors.New("upload ended")

// uploadTree streams a gzip tar of the entries (those marked in send, or
// all) into one upload, and returns the compressed size.
func (c *Config) uploadTree(ctx context.Context, entries []hostEntry, send []bool, remoteTar string, since int64) (int64, error) {
	// A few MiB between the archive and the upload keep the upload busy
	// while the producer opens the next files.
	pr, pw := newBufferedPipe(uploadChunks, uploadChunkSize)
	gz := newAdaptiveGzip(pw, time.Now)
	if c.Local {
		gz.ctl.force = storeOnly
	}
	produced := make(chan error, 1)
	go func() {
		err := writeTar(gz, entries, send, since)
		if err == nil {
			err = gz.Close()
		}
		pw.CloseWithError(err)
		produced <- err
	}()
	tctx, cancel := c.transferContext(ctx)
	defer cancel()
	_, uerr := c.Sandbox.UploadFiles(tctx, []daytona.Upload{{Path: remoteTar, Reader: pr}})
	pr.CloseWithError(errUploadEnded)
	perr := <-produced
	if perr != nil && !errors.Is(perr, errUploadEnded) && !errors.Is(perr, io.ErrClosedPipe) {
		return 0, perr
	}
	if uerr != nil {
		return 0, uerr
	}
	if perr != nil {
		return 0, perr
	}
	return gz.Written(), nil
}

// extractScript is the plugin's extract step: for a read-only bundle
// (a mode without write bits) it first compares what the sandbox holds and
// stops there when it matches, then extracts and removes the tarball. With
// a cache it also lists what the extraction changed.
func extractScript(remoteTar string, m Mapping, listing bool) string {
	qt, qd := shellQuote(remoteTar), shellQuote(m.TargetPath)
	var lines []string
	if m.Mode != nil && *m.Mode&0o222 == 0 {
		matched := "rm -f " + qt + "; exit 0;"
		if listing {
			matched = treeListingCommand(m.TargetPath, "") + "; " + matched
		}
		lines = append(lines,
			"compare_dir="+shellQuote(remoteTar+".compare")+";",
			"compare_tar="+shellQuote(remoteTar+".normalized")+";",
			"compare_list="+shellQuote(remoteTar+".members")+";",
			`cleanup_compare() { if [ -d "$compare_dir" ]; then find "$compare_dir" -type d -exec chmod u+w {} +; rm -rf "$compare_dir"; fi; rm -f "$compare_tar" "$compare_list"; };`,
			"trap cleanup_compare EXIT;",
			`mkdir -m 700 "$compare_dir" || exit 43;`,
			"tar -xf "+qt+` --no-same-owner --delay-directory-restore -C "$compare_dir" || exit 43;`,
			`(cd "$compare_dir" && find . -mindepth 1 -maxdepth 1 -print0) > "$compare_list" || exit 43;`,
			`tar -cf "$compare_tar" --format=pax -C "$compare_dir" --null -T "$compare_list" || exit 43;`,
			`if tar -df "$compare_tar" -C `+qd+` >/dev/null 2>&1; then `+matched+` fi;`,
			"cleanup_compare;",
			"trap - EXIT;",
		)
	}
	lines = append(lines, "tar -xf "+qt+" --delay-directory-restore -C "+qd+` || { echo "extract failed"; exit 43; };`)
	if listing {
		lines = append(lines, treeListingCommand(m.TargetPath, remoteTar)+";")
	}
	lines = append(lines, "rm -f "+qt+";")
	return strings.Join(lines, "\n")
}

// postUpload runs an operation's commands verbatim, in order, in their
// working directory (the remote dir by default), stopping at the first
// failure.
func (c *Config) postUpload(ctx context.Context, cmds []PostUploadCommand) error {
	for _, pc := range cmds {
		cwd := c.RemoteDir
		if pc.Cwd != nil {
			cwd = *pc.Cwd
		}
		timeout := c.timeout()
		if pc.TimeoutMs != nil {
			timeout = time.Duration(toTimeoutSeconds(*pc.TimeoutMs)) * time.Second
		}
		res, err := withSpan(c, spanOptions{name: spanPostUploadCommand}, func() (*daytona.ExecuteResponse, error) {
			return c.Sandbox.Execute(ctx, daytona.ExecuteRequest{Command: pc.Command, Cwd: cwd, Timeout: timeout})
		})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return &CommandError{Label: "post-upload", ExitCode: res.ExitCode, Output: js.Trim(res.Result)}
		}
	}
	return nil
}

// toTimeoutSeconds is the plugin's max(1, ceil(ms / 1000)).
func toTimeoutSeconds(ms float64) int {
	s := math.Ceil(ms / 1000)
	if !(s >= 1) {
		return 1
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(s)
}

// countHostFiles is the plugin's count: every entry below root that is not
// a folder (symlinks count once, never followed), skipping names exactly
// equal to an exclude entry (not glob-matched); a folder that cannot be
// read ends the count there.
func countHostFiles(root string, exclude []string) int64 {
	skip := map[string]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	var total int64
	var walk func(dir string) bool
	walk = func(dir string) bool {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if skip[e.Name()] {
				continue
			}
			if e.IsDir() {
				if !walk(dir + string(os.PathSeparator) + e.Name()) {
					return false
				}
				continue
			}
			total++
		}
		return true
	}
	walk(root)
	return total
}
