package sync

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Limits on a sandbox-authored archive, checked while it streams in. They
// bound the work spent on untrusted metadata; none is a buffer size.
const (
	maxListingLine  = 64 << 10 // one entry's rendered listing line
	maxListingBytes = 64 << 20 // all of them together
	maxEntries      = 250_000
)

// extractor reads a sandbox-authored tar and stages it inside its target
// (beside it while the target does not exist): every member is checked
// before it is written, and nothing reaches the target until the whole
// archive has been read and checked. Members are written only below the
// staging folder, never through a link: symbolic links are created after
// every other member (so no later member can be written through one), a
// member below a link is refused, and a hard link may only point at a
// regular file this archive wrote.
type extractor struct {
	target string
	stage  string
	umask  uint32
	asRoot bool // an extracting root ignores the umask (GNU tar's -p default)
	// devOf tells a folder's file system (tests swap it); a staged entry
	// whose destination is on another one is copied there, since rename
	// cannot cross file systems.
	devOf    func(path string, fi os.FileInfo) uint64
	stageDev uint64
	// foreign maps a staged folder to the copy of it made inside its
	// destination when that is on another file system.
	foreign map[string]string

	entries int
	listed  int64
	columns *listingColumns // the listing's widths so far, as tar -tvf keeps them

	kinds    map[string]byte // staged path → what is there (tar type flag; 0 = implied directory)
	links    map[string]string
	linkSeq  []string // pending symlinks in archive order
	dirMeta  map[string]entryMeta
	rootMeta *entryMeta
	buf      []byte
}

type entryMeta struct {
	mode  int64
	mtime time.Time
}

const implicitDir byte = 0

// newExtractor creates the staging folder: inside target when that is a
// folder already, so that the whole extraction stays on the target's file
// system (it may be a mount point) and needs no write access to its parent
// (GNU tar -C needs none); otherwise beside it, creating its missing
// parents. created is the topmost parent it created, for cleanup.
func newExtractor(target, stageName string) (x *extractor, created string, err error) {
	parent := filepath.Dir(target)
	inside := false
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		parent, inside = target, true
	} else if created, err = mkdirAllTracked(parent); err != nil {
		// The plugin's fs.mkdir(target, {recursive: true}) fails so,
		// naming the target.
		return nil, "", nodeFSError("mkdir", target, pathErrno(err))
	}
	stage := filepath.Join(parent, stageName)
	if err := os.Mkdir(stage, 0o777); err != nil {
		removeCreated(created)
		if !inside {
			// Where the plugin would have made the target itself.
			return nil, "", nodeFSError("mkdir", target, pathErrno(err))
		}
		return nil, "", nodeFSError("mkdir", stage, pathErrno(err))
	}
	// The mode the kernel gave a 0777 mkdir is the umask's complement.
	fi, err := os.Stat(stage)
	if err == nil {
		err = os.Chmod(stage, 0o700)
	}
	if err != nil {
		_ = os.RemoveAll(stage)
		removeCreated(created)
		return nil, "", err
	}
	x = &extractor{
		target: target, stage: stage, umask: 0o777 &^ uint32(fi.Mode().Perm()), asRoot: os.Geteuid() == 0,
		devOf: statDev, foreign: map[string]string{},
		kinds: map[string]byte{}, links: map[string]string{}, dirMeta: map[string]entryMeta{},
		buf: make([]byte, 256<<10),
	}
	x.stageDev = x.devOf(stage, fi)
	return x, created, nil
}

// statDev is the device a stat result is on.
func statDev(_ string, fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}

// mkdirAllTracked is os.MkdirAll that reports the topmost folder it created.
func mkdirAllTracked(dir string) (string, error) {
	created := ""
	for cur := dir; ; cur = filepath.Dir(cur) {
		if _, err := os.Lstat(cur); err == nil {
			break
		}
		created = cur
		if cur == filepath.Dir(cur) {
			break
		}
	}
	if created == "" {
		return "", nil
	}
	return created, os.MkdirAll(dir, 0o777)
}

// removeCreated removes folders mkdirAllTracked made, if they are empty.
func removeCreated(created string) {
	if created == "" {
		return
	}
	// Remove bottom-up; a folder with content stays.
	var dirs []string
	_ = filepath.WalkDir(created, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}

// abort removes everything staged, the copies on other file systems too.
func (x *extractor) abort() {
	for _, tmp := range x.foreign {
		_ = os.RemoveAll(tmp)
	}
	clear(x.foreign)
	if x.stage != "" {
		_ = os.RemoveAll(x.stage)
	}
	x.stage = ""
}

// read stages the archive. It returns an *UnsafeArchiveError for a member
// it refuses.
func (x *extractor) read(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return x.finishLinks()
		}
		if err != nil {
			return &archiveReadError{err: err}
		}
		if err := x.member(h, tr); err != nil {
			return err
		}
	}
}

// archiveReadError is an archive that cannot be read as tar (or a stream
// that broke off): the plugin's "listing failed", word for word (its `tar
// -tvf` failing says no more); the cause stays reachable with errors.As.
type archiveReadError struct{ err error }

func (e *archiveReadError) Error() string {
	return "Daytona sync archive listing failed"
}
func (e *archiveReadError) Unwrap() error { return e.err }

func (x *extractor) member(h *tar.Header, data io.Reader) error {
	if h.Typeflag == tar.TypeXGlobalHeader {
		return nil // pax global header: not a member
	}
	x.entries++
	if x.entries > maxEntries {
		return fmt.Errorf("Daytona syncOut tar listing entry limit exceeded (%d)", maxEntries)
	}
	if x.columns == nil {
		x.columns = newListingColumns()
	}
	line := x.columns.line(h)
	if len(line) > maxListingLine {
		return errors.New("Daytona sync archive entry listing too long")
	}
	x.listed += int64(len(line)) + 1
	if x.listed > maxListingBytes {
		return errors.New("Daytona syncOut tar total listing byte limit exceeded (64 MiB)")
	}
	if err := checkListingLine(line); err != nil {
		return err
	}
	if err := supported(h, line); err != nil {
		return err
	}
	rel, ok := cleanMember(h.Name)
	if !ok {
		return unsafeArchive("Daytona syncOut refusing tarball member that escapes the extraction dir: %s", escapeName(h.Name))
	}
	if rel == "" {
		if h.Typeflag != tar.TypeDir {
			return unsafeArchive("Daytona syncOut refusing tarball member that replaces the extraction dir: %s", line)
		}
		x.rootMeta = &entryMeta{mode: h.Mode, mtime: h.ModTime}
		return nil
	}
	if err := x.parents(rel, h.Name); err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return x.dir(rel, h)
	case tar.TypeSymlink:
		if err := x.clear(rel); err != nil {
			return err
		}
		if _, pending := x.links[rel]; !pending {
			x.linkSeq = append(x.linkSeq, rel)
		}
		x.links[rel] = h.Linkname
		x.kinds[rel] = tar.TypeSymlink
		return nil
	case tar.TypeLink:
		return x.hardlink(rel, h)
	case tar.TypeFifo:
		if err := x.clear(rel); err != nil {
			return err
		}
		p := x.path(rel)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return x.fsErr("mkfifo", rel, err)
		}
		x.kinds[rel] = tar.TypeFifo
		return x.setMeta(p, h)
	default:
		return x.file(rel, h, data)
	}
}

// supported refuses what the host should never create from a sandbox:
// devices (already unparseable as a listing), sparse files (whose declared
// size is not bounded by the archive) and unknown types.
func supported(h *tar.Header, line string) error {
	switch h.Typeflag {
	// (tar.Reader turns the legacy NUL type into TypeReg or TypeDir.)
	case tar.TypeReg, tar.TypeCont, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default:
		return unsafeArchive("Daytona syncOut refusing tarball member of an unsupported type: %s", line)
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return unsafeArchive("Daytona syncOut refusing tarball member of an unsupported type: %s", line)
		}
	}
	return nil
}

// cleanMember turns a member name into a staged path ("" for the root).
// It fails on an absolute name or a ".." segment.
func cleanMember(name string) (string, bool) {
	if strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return "", false
	}
	var parts []string
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "", ".":
		case "..":
			return "", false
		default:
			parts = append(parts, seg)
		}
	}
	return strings.Join(parts, "/"), true
}

func (x *extractor) path(rel string) string { return filepath.Join(x.stage, filepath.FromSlash(rel)) }

func (x *extractor) fsErr(op, rel string, err error) error {
	return nodeFSError(op, filepath.Join(x.target, filepath.FromSlash(rel)), pathErrno(err))
}

// parents makes sure every folder above rel is a staged folder: a member
// below a link or a file is refused, a missing folder is created as tar
// creates it (0777 less the umask).
func (x *extractor) parents(rel, name string) error {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		p := rel[:i]
		kind, ok := x.kinds[p]
		switch {
		case !ok:
			if err := os.Mkdir(x.path(p), 0o777); err != nil {
				return x.fsErr("mkdir", p, err)
			}
			x.kinds[p] = implicitDir
		case kind == tar.TypeDir || kind == implicitDir:
		case kind == tar.TypeSymlink || kind == tar.TypeLink:
			return unsafeArchive("Daytona syncOut refusing tarball member written through a link: %s", escapeName(name))
		default:
			return unsafeArchive("Daytona syncOut refusing tarball member below a non-directory member: %s", escapeName(name))
		}
	}
	return nil
}

// clear makes room at rel for a new member, as tar replaces what is
// there: a pending link is dropped, a file or an empty folder removed; a
// folder with content fails the member, as it fails tar.
func (x *extractor) clear(rel string) error {
	kind, ok := x.kinds[rel]
	if !ok {
		return nil
	}
	if kind == tar.TypeSymlink {
		delete(x.links, rel) // not on disk yet
		delete(x.kinds, rel)
		return nil
	}
	if err := os.Remove(x.path(rel)); err != nil {
		return x.fsErr("unlink", rel, err)
	}
	delete(x.kinds, rel)
	delete(x.dirMeta, rel)
	return nil
}

func (x *extractor) dir(rel string, h *tar.Header) error {
	if kind, ok := x.kinds[rel]; ok && kind != tar.TypeDir && kind != implicitDir {
		if err := x.clear(rel); err != nil {
			return err
		}
	}
	if _, ok := x.kinds[rel]; !ok {
		if err := os.Mkdir(x.path(rel), 0o700); err != nil {
			return x.fsErr("mkdir", rel, err)
		}
	}
	x.kinds[rel] = tar.TypeDir
	x.dirMeta[rel] = entryMeta{mode: h.Mode, mtime: h.ModTime}
	return nil
}

func (x *extractor) file(rel string, h *tar.Header, data io.Reader) error {
	if err := x.clear(rel); err != nil {
		return err
	}
	p := x.path(rel)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return x.fsErr("open", rel, err)
	}
	x.kinds[rel] = tar.TypeReg
	// As a plain writer, so that the copy goes through x.buf (*os.File's
	// ReadFrom would copy 32 KiB at a time: a system call each).
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, data, x.buf)
	if err == nil {
		err = f.Chmod(x.mode(h.Mode))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return x.fsErr("write", rel, err)
		}
		return &archiveReadError{err: err}
	}
	return os.Chtimes(p, time.Time{}, h.ModTime)
}

func (x *extractor) hardlink(rel string, h *tar.Header) error {
	target, ok := cleanMember(h.Linkname)
	if !ok || target == "" {
		return unsafeArchive("Daytona syncOut refusing tarball link whose target escapes the extraction dir: %s -> %s",
			escapeName(h.Name), escapeName(h.Linkname))
	}
	if x.kinds[target] != tar.TypeReg {
		return unsafeArchive("Daytona syncOut refusing hardlink to a member that is not a regular file of the archive: %s link to %s",
			escapeName(h.Name), escapeName(h.Linkname))
	}
	if target == rel {
		return nil
	}
	if err := x.clear(rel); err != nil {
		return err
	}
	if err := os.Link(x.path(target), x.path(rel)); err != nil {
		return x.fsErr("link", rel, err)
	}
	x.kinds[rel] = tar.TypeReg
	return nil
}

// mode is the mode a member gets: the archive's permission bits, less the
// umask unless extracting as root. Setuid, setgid and sticky bits are never
// kept: GNU tar keeps them only as root, and then with the archive's owner,
// whereas this extractor never chowns, so a sandbox could plant a file
// setuid to whoever runs the worker.
func (x *extractor) mode(h int64) os.FileMode {
	m := uint32(h & 0o777)
	if !x.asRoot {
		m &^= x.umask
	}
	return os.FileMode(m)
}

func (x *extractor) setMeta(p string, h *tar.Header) error {
	if err := os.Chmod(p, x.mode(h.Mode)); err != nil {
		return err
	}
	return os.Chtimes(p, time.Time{}, h.ModTime)
}

// finishLinks checks every symbolic link against the staged tree, links
// within the archive followed (the plugin checks each link alone, so a
// chain such as "a -> ." then "b -> a/.." slips through it), and creates
// them.
func (x *extractor) finishLinks() error {
	for _, rel := range x.linkSeq {
		target, ok := x.links[rel]
		if !ok {
			continue
		}
		if x.linkEscapes(rel, target) {
			return unsafeArchive("Daytona syncOut refusing tarball link whose target escapes the extraction dir: %s -> %s",
				escapeName(rel), escapeName(target))
		}
	}
	for _, rel := range x.linkSeq {
		target, ok := x.links[rel]
		if !ok {
			continue
		}
		p := x.path(rel)
		if _, err := os.Lstat(p); err == nil {
			// A folder with content cannot be replaced, as with tar.
			if err := os.Remove(p); err != nil {
				return x.fsErr("unlink", rel, err)
			}
			delete(x.dirMeta, rel)
		}
		if err := os.Symlink(target, p); err != nil {
			return x.fsErr("symlink", rel, err)
		}
	}
	return nil
}

// linkEscapes resolves a link's target inside the staged tree, following
// the archive's links, and reports whether it climbs above the root.
func (x *extractor) linkEscapes(rel, target string) bool {
	budget := 40 // as the kernel's ELOOP limit; a loop is not an escape
	resolve := func(dir []string, target string) bool {
		if strings.HasPrefix(target, "/") {
			return true
		}
		stack := append([]string(nil), dir...)
		queue := strings.Split(target, "/")
		for len(queue) > 0 {
			c := queue[0]
			queue = queue[1:]
			switch c {
			case "", ".":
				continue
			case "..":
				if len(stack) == 0 {
					return true
				}
				stack = stack[:len(stack)-1]
				continue
			}
			stack = append(stack, c)
			if t, ok := x.links[strings.Join(stack, "/")]; ok {
				budget--
				if budget < 0 {
					return false
				}
				stack = stack[:len(stack)-1]
				if strings.HasPrefix(t, "/") {
					return true
				}
				queue = append(strings.Split(t, "/"), queue...)
			}
		}
		return false
	}
	parts := strings.Split(rel, "/")
	return resolve(parts[:len(parts)-1], target)
}

// commit moves the staged tree into the target: a missing target is the
// staged folder renamed; an existing one receives each staged entry (a
// folder merged into a folder, anything else replacing what is there), as
// tar extracting into it would. Conflicts tar would fail on (a file where a
// folder with content is) are found, and what goes to another file system
// is copied there, before anything moves.
func (x *extractor) commit() error {
	fi, err := os.Stat(x.target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		mode := os.FileMode(0o777 &^ x.umask)
		if x.rootMeta != nil {
			mode = x.mode(x.rootMeta.mode)
		}
		if err := os.Chmod(x.stage, mode|0o700); err != nil {
			return err
		}
		if err := os.Rename(x.stage, x.target); err != nil {
			return nodeFSError("rename", x.target, pathErrno(err))
		}
		x.stage = ""
		return x.applyDirMeta(mode)
	case err != nil:
		return nodeFSError("stat", x.target, pathErrno(err))
	case !fi.IsDir():
		return nodeFSError("mkdir", x.target, syscall.EEXIST)
	}
	if err := x.checkMerge(x.stage, x.target, x.stageDev); err != nil {
		return err
	}
	if err := x.merge(x.stage, x.target); err != nil {
		return err
	}
	// What is left staged are folders merged into existing ones; the stage
	// goes before the target's own time is set, since removing it from
	// inside the target changes that time.
	x.abort()
	var rootMode os.FileMode
	if x.rootMeta != nil {
		rootMode = x.mode(x.rootMeta.mode)
	}
	return x.applyDirMeta(rootMode)
}

// checkMerge finds the conflicts merging stageDir (on file system dev) into
// targetDir would fail on, and copies each staged folder whose destination
// folder is on another file system into a hidden folder there, which merge
// then takes it from.
func (x *extractor) checkMerge(stageDir, targetDir string, dev uint64) error {
	entries, err := os.ReadDir(stageDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s, t := filepath.Join(stageDir, e.Name()), filepath.Join(targetDir, e.Name())
		tfi, err := os.Lstat(t)
		if err != nil {
			continue // moved whole
		}
		switch {
		case e.IsDir() && tfi.IsDir():
			sub, subDev := s, dev
			if tdev := x.devOf(t, tfi); tdev != dev {
				// Hidden in the destination folder, like the stage in the
				// target, and under the stage's own name.
				tmp := filepath.Join(t, filepath.Base(x.stage))
				x.foreign[s] = tmp
				if err := copyTree(s, tmp, x.buf); err != nil {
					return err
				}
				sub, subDev = tmp, tdev
			}
			if err := x.checkMerge(sub, t, subDev); err != nil {
				return err
			}
		case tfi.IsDir() && !e.IsDir():
			if names, err := readDirNames(t); err != nil || len(names) > 0 {
				return nodeFSError("rename", t, syscall.ENOTEMPTY)
			}
		}
	}
	return nil
}

// copyTree copies a staged tree to dst (which must not exist yet) on
// another file system: folders, files, symbolic links and pipes, with their
// modes and, for files and pipes, times; hard links within the tree stay
// linked (one across file systems cannot be, as with tar).
func copyTree(src, dst string, buf []byte) error {
	linked := map[[2]uint64]string{}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fail := func(op string, err error) error { return nodeFSError(op, to, pathErrno(err)) }
		switch fi.Mode().Type() {
		case fs.ModeDir:
			if err := os.Mkdir(to, 0o700); err != nil {
				return fail("mkdir", err)
			}
			if err := os.Chmod(to, fi.Mode().Perm()|0o700); err != nil {
				return fail("chmod", err)
			}
			return nil
		case fs.ModeSymlink:
			target, err := os.Readlink(p)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				return fail("symlink", err)
			}
			return nil
		case fs.ModeNamedPipe:
			if err := syscall.Mkfifo(to, 0o600); err != nil {
				return fail("mkfifo", err)
			}
		case 0:
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				key := [2]uint64{uint64(st.Dev), st.Ino}
				if first, ok := linked[key]; ok {
					if err := os.Link(first, to); err != nil {
						return fail("link", err)
					}
					return nil
				}
				linked[key] = to
			}
			if err := copyFile(p, to, buf); err != nil {
				return fail("copyfile", err)
			}
		default:
			return fail("copyfile", syscall.EINVAL) // the extractor stages nothing else
		}
		if err := os.Chmod(to, fi.Mode().Perm()); err != nil {
			return fail("chmod", err)
		}
		if err := os.Chtimes(to, time.Time{}, fi.ModTime()); err != nil {
			return fail("utime", err)
		}
		return nil
	})
}

// copyFile copies a regular file's bytes into a new file (mode 0600 until
// its own mode is set).
func copyFile(src, dst string, buf []byte) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, buf)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func (x *extractor) merge(stageDir, targetDir string) error {
	entries, err := os.ReadDir(stageDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		s, t := filepath.Join(stageDir, e.Name()), filepath.Join(targetDir, e.Name())
		tfi, err := os.Lstat(t)
		switch {
		case err != nil:
		case e.IsDir() && tfi.IsDir():
			if tmp, ok := x.foreign[s]; ok {
				s = tmp
			}
			if err := x.merge(s, t); err != nil {
				return err
			}
			continue
		case tfi.IsDir() || e.IsDir():
			// A folder replaced by a file, or a file (or a link, never
			// followed) by a folder: rename cannot swap kinds.
			if err := os.Remove(t); err != nil {
				return nodeFSError("unlink", t, pathErrno(err))
			}
		}
		if err := os.Rename(s, t); err != nil {
			return nodeFSError("rename", t, pathErrno(err))
		}
	}
	return nil
}

// applyDirMeta gives the archive's folders their modes and times once
// nothing more is written into them (deepest first, as tar's delayed
// restore), and the root its mode when the archive named it.
func (x *extractor) applyDirMeta(rootMode os.FileMode) error {
	rels := make([]string, 0, len(x.dirMeta))
	for rel := range x.dirMeta {
		rels = append(rels, rel)
	}
	sort.Slice(rels, func(i, j int) bool { return strings.Count(rels[i], "/") > strings.Count(rels[j], "/") })
	for _, rel := range rels {
		m := x.dirMeta[rel]
		p := filepath.Join(x.target, filepath.FromSlash(rel))
		if err := os.Chmod(p, x.mode(m.mode)); err != nil {
			return nodeFSError("chmod", p, pathErrno(err))
		}
		if err := os.Chtimes(p, time.Time{}, m.mtime); err != nil {
			return nodeFSError("utime", p, pathErrno(err))
		}
	}
	if x.rootMeta != nil {
		if err := os.Chmod(x.target, rootMode); err != nil {
			return nodeFSError("chmod", x.target, pathErrno(err))
		}
		if err := os.Chtimes(x.target, time.Time{}, x.rootMeta.mtime); err != nil {
			return nodeFSError("utime", x.target, pathErrno(err))
		}
	}
	return nil
}

// cleanup removes the staging folders if they are still there.
func (x *extractor) cleanup() { x.abort() }
