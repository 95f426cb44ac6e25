package sync

import (
	"archive/tar"
	"bytes"
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
	since := racySince(cfg.RacyClock())
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
	// recorded: the target is named by this mapping alone, so it keeps a
	// manifest; skip: the sandbox already has it.
	recorded, skip bool
}

// modeKey is the requested mode, or -1 for none.
func modeKey(m Mapping) int64 {
	if m.Mode == nil {
		return -1
	}
	return *m.Mode & 0o7777
}

// inFiles sends a batch of file mappings: one mkdir round trip (which also
// reads the targets' manifests and lists them), one bulk upload to reserved
// temps in the remote dir (so the closing mv is an atomic same-file-system
// rename and an interrupted upload never leaves a truncated target), the
// modes set on the temps, one promote script (which also completes the
// manifests of what it moved). since is racySince of the sync's start.
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

	// A target named by more than one mapping of the batch is always sent
	// and keeps no manifest: the promote moves each in turn and the last
	// one must win, which skipping one of them would undo.
	var recorded []int
	var names, targets []string
	if c.SandboxID != "" {
		named := make(map[string]int, len(plans))
		for _, p := range plans {
			named[p.m.TargetPath]++
		}
		for i, p := range plans {
			if named[p.m.TargetPath] == 1 {
				plans[i].recorded = true
				recorded = append(recorded, i)
				names = append(names, manifestName(p.m.TargetPath))
				targets = append(targets, p.m.TargetPath)
			}
		}
	}
	mkdirs := make([]string, len(parents))
	for i, d := range parents {
		mkdirs[i] = "mkdir -p " + shellQuote(d)
	}
	cmd := strings.Join(mkdirs, " && ")
	if len(recorded) > 0 {
		cmd += " && { " + manifestReadScript(c.RemoteDir, names) + pathsListingCommand(targets) + "; }"
	}
	out, err := withSpan(c, spanOptions{name: spanEnsureDirectory}, func() (string, error) {
		return c.run(ctx, cmd, "syncIn mkdir")
	})
	if err != nil {
		return 0, 0, err
	}
	var mdir string
	if len(recorded) > 0 {
		// A manifest that could not be read is written anew.
		dir, manifests, rest, ok := parseManifestRead(out, len(recorded))
		mdir = dir
		if ok {
			listing := parseListing(rest)
			for k, i := range recorded {
				p := &plans[i]
				st, ok := parseManifest(manifests[k], identityOf(c.SandboxID, p.m), true)[p.m.TargetPath]
				p.skip = ok && st.unchanged(p.sig, listing[p.m.TargetPath], func() (uint64, error) {
					return contentSum(p.m.SourcePath, true)
				})
			}
		}
	}

	var uploads, records []daytona.Upload
	var sources []*lazyFile
	var scratch []string
	var finish []string // promote lines that complete the manifests
	promoted := 0
	for i := range plans {
		p := &plans[i]
		if p.skip {
			continue
		}
		f := &lazyFile{path: p.m.SourcePath}
		if mdir != "" && p.recorded && p.sig.racy(since) {
			f.sum = crc64.New(crcTable())
		}
		sources = append(sources, f)
		uploads = append(uploads, daytona.Upload{Path: p.raw, Reader: f})
		scratch = append(scratch, p.raw)
		promoted++
		if mdir == "" || !p.recorded {
			continue
		}
		// The manifest's part goes after every file, so that the digest
		// of what was read is complete when it is built.
		temp := manifestTemp(mdir, p.raw)
		records = append(records, daytona.Upload{Path: temp, Reader: &deferredReader{build: func() ([]byte, error) {
			w := manifestWriter{identity: identityOf(c.SandboxID, p.m)}
			st := entryState{host: p.sig}
			if f.sum != nil {
				st.racy, st.sum = true, f.sum.Sum64()
			}
			if f.sum == nil || f.eof {
				w.add(p.m.TargetPath, st)
			}
			return w.bytes(), nil
		}}})
		scratch = append(scratch, temp)
		finish = append(finish, manifestFinishScript(temp, mdir+"/"+manifestName(p.m.TargetPath), pathsFind([]string{p.m.TargetPath})))
	}
	uploads = append(uploads, records...)
	fail := func(err error) (int64, int64, error) {
		c.removeScratch(ctx, scratch)
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
	if promoted == 0 {
		// Nothing to move, so no round trip; the span still marks the
		// step, as the plugin's trace of a file batch always has
		// ensureDirectory, transfer and promote.
		_ = withSpanErr(c, spanOptions{name: spanPromote}, func() error { return nil })
		return int64(len(mappings)), total, nil
	}
	lines := make([]string, 0, 2*len(plans)+len(finish))
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
	lines = append(lines, finish...)
	_, err = withSpan(c, spanOptions{name: spanPromote}, func() (string, error) {
		return c.run(ctx, shScript(strings.Join(lines, "\n")), "syncIn rename")
	})
	if err != nil {
		return fail(err)
	}
	return int64(len(mappings)), total, nil
}

// deferredReader builds its content when first read: a manifest's part of
// an upload, which records what the parts before it sent.
type deferredReader struct {
	build func() ([]byte, error)
	r     *bytes.Reader
}

func (d *deferredReader) Read(p []byte) (int, error) {
	if d.r == nil {
		b, err := d.build()
		if err != nil {
			return 0, err
		}
		d.r = bytes.NewReader(b)
	}
	return d.r.Read(p)
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
// the target created (and, for an incremental sync, its manifest read and
// the target listed), a gzip tar of the tree, or of what changed, streamed
// into the upload with the manifest's new records after it, and one extract
// script run, which completes the manifest. since is racySince of the
// sync's start.
func (c *Config) inDir(ctx context.Context, m Mapping, since int64) (int64, int64, error) {
	entries, err := withSpan(c, spanOptions{name: spanPack, wallMsAttr: attrPackWallMs}, func() ([]hostEntry, error) {
		return walkHostTree(m.SourcePath, m.Exclude, m.FollowSymlinks)
	})
	if err != nil {
		return 0, 0, err
	}
	remoteTar := nodeJoin(c.RemoteDir, c.scratchName(".tar.gz"))
	incremental := c.SandboxID != "" && len(entries) <= maxTreeEntries
	identity, name := identityOf(c.SandboxID, m), manifestName(m.TargetPath)
	cmd := "mkdir -p " + shellQuote(m.TargetPath)
	if incremental {
		cmd += " && { " + manifestReadScript(c.RemoteDir, []string{name}) + treeListingCommand(m.TargetPath) + "; }"
	}
	out, err := withSpan(c, spanOptions{name: spanEnsureDirectory}, func() (string, error) {
		return c.run(ctx, cmd, "syncIn mkdir")
	})
	if err != nil {
		return 0, 0, err
	}
	var mdir string
	var prev map[string]entryState
	var send []bool
	if incremental {
		dir, manifests, rest, ok := parseManifestRead(out, 1)
		mdir = dir
		if ok {
			if prev = parseManifest(manifests[0], identity, m.FollowSymlinks); prev != nil {
				send = changedEntries(entries, prev, parseListing(rest), hostSum)
			}
		}
	}
	var rec *treeRecord
	if mdir != "" && manifestStale(entries, send, prev, since) {
		rec = &treeRecord{temp: manifestTemp(mdir, remoteTar), final: mdir + "/" + name}
	}

	var archiveBytes int64
	err = withSpanErr(c, spanOptions{
		name: spanTransfer, wallMsAttr: attrTransferWallMs,
		attributes: map[string]any{attrTransferGuardCount: 1, attrTransferDirection: directionInbound},
	}, func() error {
		var err error
		racyFrom, manifest := int64(neverRacy), func() []byte { return nil }
		if rec != nil {
			racyFrom = since
			manifest = func() []byte { return treeManifest(identity, entries, send, prev, since) }
		}
		archiveBytes, err = c.uploadTree(ctx, entries, send, remoteTar, racyFrom, rec, manifest)
		return err
	})
	if err == nil {
		_, err = withSpan(c, spanOptions{name: spanExtractTarball}, func() (string, error) {
			return c.run(ctx, shScript(extractScript(remoteTar, m, rec)), "syncIn extract")
		})
	}
	if err != nil {
		scratch := []string{remoteTar}
		if rec != nil {
			scratch = append(scratch, rec.temp)
		}
		c.removeScratch(ctx, scratch)
		return 0, 0, err
	}
	return countHostFiles(m.SourcePath, m.Exclude), archiveBytes, nil
}

// treeRecord is where a tree sync uploads its manifest's records (temp)
// and where the extract script moves them once complete (final).
type treeRecord struct{ temp, final string }

// manifestStale says whether a tree's manifest must be written again: the
// sync sends something, or some record would change (a racy one settled,
// one the host no longer has dropped).
func manifestStale(entries []hostEntry, send []bool, prev map[string]entryState, since int64) bool {
	if send == nil || len(prev) != len(entries) {
		return true
	}
	for i, e := range entries {
		if send[i] {
			return true
		}
		if st := prev[e.rel]; st.settled(since) != st {
			return true
		}
	}
	return false
}

// changedEntries marks what a sync must send: every entry the manifest
// cannot vouch for on both sides, all names of a hard-link group any of whose
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

// treeManifest is the part of a tree's manifest the worker uploads, once
// the tar is written: entries sent carry the signature and, if racy, the
// digest of what was archived (the extract script adds their sandbox
// side); entries not sent keep their record, a racy one (just verified by
// its digest) made plain once it is no longer racy.
func treeManifest(identity string, entries []hostEntry, send []bool, prev map[string]entryState, since int64) []byte {
	w := manifestWriter{identity: identity}
	for i := range entries {
		e := &entries[i]
		if send == nil || send[i] {
			w.add(e.rel, entryState{host: e.sig, racy: e.racy, sum: e.sum})
		} else if st, ok := prev[e.rel]; ok {
			w.add(e.rel, st.settled(since))
		}
	}
	return w.bytes()
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
// all) into one upload, with, when rec is set, the manifest's records
// (built once the tar is written) as a second file; it returns the
// compressed size of the tar.
func (c *Config) uploadTree(ctx context.Context, entries []hostEntry, send []bool, remoteTar string, since int64, rec *treeRecord, manifest func() []byte) (int64, error) {
	// A few MiB between the archive and the upload keep the upload busy
	// while the producer opens the next files.
	pr, pw := newBufferedPipe(uploadChunks, uploadChunkSize)
	gz := newAdaptiveGzip(pw, time.Now)
	if c.Local {
		gz.ctl.force = storeOnly
	}
	done := make(chan struct{})
	var perr error
	go func() {
		defer close(done)
		perr = writeTar(gz, entries, send, since)
		if perr == nil {
			perr = gz.Close()
		}
		pw.CloseWithError(perr)
	}()
	uploads := []daytona.Upload{{Path: remoteTar, Reader: pr}}
	if rec != nil {
		// Read only after the tar's end, so the producer is done by then.
		uploads = append(uploads, daytona.Upload{Path: rec.temp, Reader: &deferredReader{build: func() ([]byte, error) {
			<-done
			if perr != nil {
				return nil, perr
			}
			return manifest(), nil
		}}})
	}
	tctx, cancel := c.transferContext(ctx)
	defer cancel()
	_, uerr := c.Sandbox.UploadFiles(tctx, uploads)
	pr.CloseWithError(errUploadEnded)
	<-done
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
// rec it also completes the manifest: with what the extraction changed, or,
// when the bundle matched, with the target as it is (every entry sent is
// then what it would have written).
func extractScript(remoteTar string, m Mapping, rec *treeRecord) string {
	qt, qd := shellQuote(remoteTar), shellQuote(m.TargetPath)
	var lines []string
	if m.Mode != nil && *m.Mode&0o222 == 0 {
		matched := "rm -f " + qt + "; exit 0;"
		if rec != nil {
			matched = manifestFinishScript(rec.temp, rec.final, treeFind(m.TargetPath, "")) + " " + matched
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
	if rec != nil {
		lines = append(lines, manifestFinishScript(rec.temp, rec.final, treeFind(m.TargetPath, remoteTar)))
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
