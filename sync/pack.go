package sync

import (
	"archive/tar"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// hostEntry is one member of a directory mapping's tar, found by walking
// the host tree the way `tar -c -C <dir> --null -T <top-level names>` does.
type hostEntry struct {
	rel    string // "keep/a.txt"; the member name is "./" + rel
	abs    string
	kind   byte // tar type flag
	mode   int64
	size   int64
	mtime  time.Time
	link   string // symlink target; for a hard link, the first name's rel
	uid    int
	gid    int
	rdev   uint64
	sig    hostSig
	linkOf int // index of the first member of its hard-link group, -1 for none
	// racy and sum are set by writeTar for a file or symlink archived
	// with a racy signature (see entryState): the digest of what went in.
	racy bool
	sum  uint64
}

// hostSig identifies a host file's state: any write, chmod, rename or
// replacement changes its ctime or inode, unless it falls in the same
// coarse timestamp granule as the signature (see entryState.racy).
type hostSig struct {
	dev, ino      uint64
	size          int64
	mtime, ctime  int64 // nanoseconds
	mode          uint32
	kind          byte
	nlink         uint64
	followedLinks bool
}

func sigOf(st *syscall.Stat_t, kind byte, follow bool) hostSig {
	mtime, ctime := statTimes(st)
	return hostSig{
		dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: mtime.Nano(), ctime: ctime.Nano(), mode: uint32(st.Mode), kind: kind, nlink: uint64(st.Nlink),
		followedLinks: follow,
	}
}

// walkHostTree lists what a directory mapping archives: every entry under
// root except the excluded ones (GNU tar exclusion), symlinks as links or,
// with follow, as what they point to. Names are sorted for a stable
// archive. It fails on anything GNU tar would fail the plugin's pack on (an
// unreadable entry, a dangling link to follow) and on a symlink loop.
func walkHostTree(root string, exclude []string, follow bool) ([]hostEntry, error) {
	names, err := readDirNames(root)
	if err != nil {
		return nil, nodeFSError("opendir", root, pathErrno(err))
	}
	w := &treeWalker{root: root, ex: newExcluder(exclude), follow: follow, seen: map[[2]uint64]int{}}
	for _, name := range names {
		if err := w.visit(filepath.Join(root, name), name, nil); err != nil {
			return nil, err
		}
	}
	return w.entries, nil
}

type treeWalker struct {
	root    string
	ex      excluder
	follow  bool
	entries []hostEntry
	seen    map[[2]uint64]int // (dev, ino) of multiply linked files → entry index
}

// visit adds abs (member "./"+rel) and, for a directory, what it holds.
// ancestors are the (dev, ino) of the directories above it (loop check).
func (w *treeWalker) visit(abs, rel string, ancestors [][2]uint64) error {
	if w.ex.excluded("./" + rel) {
		return nil
	}
	var fi os.FileInfo
	var err error
	if w.follow {
		fi, err = os.Stat(abs)
	} else {
		fi, err = os.Lstat(abs)
	}
	if err != nil {
		return fmt.Errorf("Daytona syncIn cannot read %s: %w", abs, pathErrno(err))
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("Daytona syncIn cannot stat %s", abs)
	}
	mtime, _ := statTimes(st)
	e := hostEntry{
		rel: rel, abs: abs, mode: int64(st.Mode & 0o7777), mtime: time.Unix(mtime.Sec, 0),
		uid: int(st.Uid), gid: int(st.Gid), linkOf: -1,
	}
	switch fi.Mode().Type() {
	case 0:
		e.kind, e.size = tar.TypeReg, st.Size
		// A file reached twice is archived once and then as a hard link,
		// as GNU tar does (with -h a symlink can lead to a file again).
		if st.Nlink > 1 || w.follow {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, dup := w.seen[key]; dup {
				e.kind, e.size, e.linkOf, e.link = tar.TypeLink, 0, first, w.entries[first].rel
			} else {
				w.seen[key] = len(w.entries)
			}
		}
	case fs.ModeDir:
		e.kind = tar.TypeDir
	case fs.ModeSymlink:
		e.kind = tar.TypeSymlink
		if e.link, err = os.Readlink(abs); err != nil {
			return fmt.Errorf("Daytona syncIn cannot read link %s: %w", abs, pathErrno(err))
		}
	case fs.ModeNamedPipe:
		e.kind = tar.TypeFifo
	case fs.ModeDevice | fs.ModeCharDevice:
		e.kind, e.rdev = tar.TypeChar, uint64(st.Rdev)
	case fs.ModeDevice:
		e.kind, e.rdev = tar.TypeBlock, uint64(st.Rdev)
	default:
		return nil // sockets: GNU tar says "socket ignored" and goes on
	}
	e.sig = sigOf(st, e.kind, w.follow)
	w.entries = append(w.entries, e)
	if e.kind != tar.TypeDir {
		return nil
	}
	self := [2]uint64{uint64(st.Dev), st.Ino}
	for _, a := range ancestors {
		if a == self {
			return fmt.Errorf("Daytona syncIn cannot follow %s: the symbolic link loops back to a directory above it", abs)
		}
	}
	names, err := readDirNames(abs)
	if err != nil {
		return fmt.Errorf("Daytona syncIn cannot read %s: %w", abs, pathErrno(err))
	}
	next := append(ancestors[:len(ancestors):len(ancestors)], self)
	for _, name := range names {
		if err := w.visit(filepath.Join(abs, name), rel+"/"+name, next); err != nil {
			return err
		}
	}
	return nil
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// idNames caches user and group names for tar headers, as GNU tar records
// them (an extracting root maps owners by name first).
type idNames struct {
	users, groups map[int]string
}

func (n *idNames) user(id int) string {
	if n.users == nil {
		n.users = map[int]string{}
	}
	if s, ok := n.users[id]; ok {
		return s
	}
	s := ""
	if u, err := user.LookupId(strconv.Itoa(id)); err == nil {
		s = u.Username
	}
	n.users[id] = s
	return s
}

func (n *idNames) group(id int) string {
	if n.groups == nil {
		n.groups = map[int]string{}
	}
	if s, ok := n.groups[id]; ok {
		return s
	}
	s := ""
	if g, err := user.LookupGroupId(strconv.Itoa(id)); err == nil {
		s = g.Name
	}
	n.groups[id] = s
	return s
}

// errChangedWhileRead is a file that changed while it was archived; GNU tar
// fails the plugin's pack in that case too.
var errChangedWhileRead = errors.New("file changed as we read it")

// neverRacy, passed as writeTar's since, makes it digest nothing: no
// signature is racy from then on.
const neverRacy = math.MaxInt64

// writeTar writes the given entries as a tar stream (no end-of-archive
// padding beyond what tar.Writer.Close adds). A regular file's entry is
// updated to what was archived; a file or symlink whose signature is racy
// from since on (see racySince) also gets the digest of what was archived.
func writeTar(w io.Writer, entries []hostEntry, send []bool, since int64) error {
	tw := tar.NewWriter(w)
	var names idNames
	buf := make([]byte, 256<<10)
	for i := range entries {
		if send != nil && !send[i] {
			continue
		}
		e := &entries[i]
		var f *os.File
		if e.kind == tar.TypeReg {
			// The file is looked at again now, as GNU tar stats each file
			// just before reading it: a file edited since the walk (which
			// can be minutes ago, before the upload started) is archived as
			// it is now, and its recorded signature is the one sent.
			var err error
			if f, err = restat(e); err != nil {
				return err
			}
		}
		e.racy = (e.kind == tar.TypeReg || e.kind == tar.TypeSymlink) && e.sig.racy(since)
		err := writeMember(tw, &names, e, f, buf)
		if f != nil {
			f.Close()
		}
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

func writeMember(tw *tar.Writer, names *idNames, e *hostEntry, f *os.File, buf []byte) error {
	h := &tar.Header{
		Typeflag: e.kind,
		Name:     "./" + e.rel,
		Mode:     e.mode,
		Uid:      e.uid,
		Gid:      e.gid,
		Uname:    names.user(e.uid),
		Gname:    names.group(e.gid),
		ModTime:  e.mtime,
	}
	switch e.kind {
	case tar.TypeDir:
		h.Name += "/"
	case tar.TypeReg:
		h.Size = e.size
	case tar.TypeSymlink:
		h.Linkname = e.link
	case tar.TypeLink:
		h.Linkname = "./" + e.link
	case tar.TypeChar, tar.TypeBlock:
		h.Devmajor, h.Devminor = int64(devMajor(e.rdev)), int64(devMinor(e.rdev))
	}
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("Daytona syncIn cannot archive %s: %w", e.abs, err)
	}
	switch {
	case e.racy && e.kind == tar.TypeSymlink:
		e.sum = linkSum(e.link)
	case e.racy && e.size == 0:
		e.sum = crc64.Checksum(nil, crcTable())
	case e.kind == tar.TypeReg && e.size > 0:
		return copyFileExactly(tw, e, f, buf)
	}
	return nil
}

func changedWhileRead(e *hostEntry) error {
	return fmt.Errorf("Daytona syncIn cannot archive %s: %w", e.abs, errChangedWhileRead)
}

// restat looks at a regular file of the walk again and takes its size,
// mode, owner, times and signature from what it is now; it fails as changed
// when the name no longer holds a regular file. A file with content is
// opened (an empty one is not), and must be the file just
// stat'ed: a symlink, unless links are followed, is not opened through, and
// O_NONBLOCK keeps a pipe swapped in from blocking the open.
func restat(e *hostEntry) (*os.File, error) {
	follow := e.sig.followedLinks
	var fi os.FileInfo
	var err error
	if follow {
		fi, err = os.Stat(e.abs)
	} else {
		fi, err = os.Lstat(e.abs)
	}
	if err != nil {
		return nil, fmt.Errorf("Daytona syncIn cannot read %s: %w", e.abs, pathErrno(err))
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return nil, changedWhileRead(e)
	}
	mtime, _ := statTimes(st)
	e.size, e.mode, e.mtime = st.Size, int64(st.Mode&0o7777), time.Unix(mtime.Sec, 0)
	e.uid, e.gid = int(st.Uid), int(st.Gid)
	e.sig = sigOf(st, e.kind, follow)
	if e.size == 0 {
		return nil, nil
	}
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(e.abs, flags, 0)
	if err != nil && !(errors.Is(err, syscall.ELOOP) && !follow) {
		return nil, fmt.Errorf("Daytona syncIn cannot read %s: %w", e.abs, pathErrno(err))
	}
	if err != nil {
		return nil, changedWhileRead(e)
	}
	if ost, err := fstat(f); err != nil || ost.Ino != e.sig.ino || uint64(ost.Dev) != e.sig.dev {
		f.Close()
		return nil, changedWhileRead(e)
	}
	return f, nil
}

// copyFileExactly copies the content of f, opened by restat, which must
// not change while it is read: the same size and times as when opened.
// A racy entry's digest is taken from the very bytes archived: a rewrite
// during the read that its times cannot show still differs from it later.
func copyFileExactly(tw io.Writer, e *hostEntry, f *os.File, buf []byte) error {
	// tar.Writer's ReadFrom would read 32 KiB at a time; buf is larger.
	dst := struct{ io.Writer }{tw}
	var h hash.Hash64
	if e.racy {
		h = crc64.New(crcTable())
		dst.Writer = io.MultiWriter(tw, h)
	}
	n, err := io.CopyBuffer(dst, taggedReader{io.LimitReader(f, e.size)}, buf)
	if err != nil {
		var se *sourceErr
		if errors.As(err, &se) {
			return fmt.Errorf("Daytona syncIn cannot read %s: %w", e.abs, se.err)
		}
		return err
	}
	if n != e.size {
		return changedWhileRead(e)
	}
	st, err := fstat(f)
	if err != nil || st.Size != e.size {
		return changedWhileRead(e)
	}
	if mtime, ctime := statTimes(st); mtime.Nano() != e.sig.mtime || ctime.Nano() != e.sig.ctime {
		return changedWhileRead(e)
	}
	if h != nil {
		e.sum = h.Sum64()
	}
	return nil
}

// sourceErr is a read failure of a host file, told apart from a failure of
// the stream it is copied into.
type sourceErr struct{ err error }

func (e *sourceErr) Error() string { return e.err.Error() }

type taggedReader struct{ r io.Reader }

func (t taggedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		err = &sourceErr{err}
	}
	return n, err
}

func fstat(f *os.File) (*syscall.Stat_t, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("no stat")
	}
	return st, nil
}

// devMajor and devMinor split a Linux dev_t (glibc's encoding).
func devMajor(d uint64) uint32 { return uint32((d>>32)&0xfffff000) | uint32((d>>8)&0xfff) }
func devMinor(d uint64) uint32 { return uint32((d>>12)&0xffffff00) | uint32(d&0xff) }
