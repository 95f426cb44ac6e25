package sync

import (
	"hash/crc64"
	"io"
	"os"
	"strings"
	stdsync "sync"
	"syscall"
	"time"
)

// Cache remembers what earlier syncs in left in one sandbox, so that a
// later sync of the same trees and files sends only what differs, with the
// outcome of a full sync.
//
// For each entry it wrote, the cache keeps the host file's signature when
// it was read (device, inode, size, mtime, ctime, mode) and the sandbox
// entry's signature right after it landed (type, mode, size, mtime, ctime,
// link target), both from the kernel. A later sync lists the target in the
// same round trip that creates it; an entry is skipped only when the host
// file still has its signature and the sandbox entry still has its own.
// Any write, chmod, rename or replacement on either side changes a ctime
// (which no user can set), so a changed file is never skipped, with one
// exception handled apart: where timestamps are coarse (Linux before 6.13
// advances them once per jiffy, FAT every 2 s), a same-size rewrite in the
// granule of the read leaves the signature as it was. An entry whose host
// signature was that close to the sync is recorded as racy, with a digest
// of what was sent, and is skipped later only if the host content still
// has that digest (as Git does for its racily clean index entries). An entry the
// sandbox no longer has, or that the listing could not show, is sent. What
// a full sync would leave alone (sandbox files the host does not have)
// stays as it is, exactly as `tar -xf` leaves it.
//
// A Cache belongs to one sandbox (the worker keeps one per lease) and is
// safe for concurrent use. It holds at most maxCachedEntries entries; a
// tree larger than maxTreeEntries is always sent whole.
type Cache struct {
	mu    stdsync.Mutex
	trees map[string]*treeState // by sandbox target path
	files map[string]fileState  // by sandbox target path
	held  int
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{trees: map[string]*treeState{}, files: map[string]fileState{}}
}

const (
	maxCachedEntries = 200_000
	maxTreeEntries   = 100_000
)

type treeState struct {
	entries map[string]entryState // by member path ("keep/a.txt")
}

type entryState struct {
	host    hostSig
	sandbox string
	// racy: the host signature was taken within racyMargin of the sync's
	// start, so a same-size rewrite right after the read may have kept it;
	// sum is then the CRC-64 of the content (or link target) sent.
	racy bool
	sum  uint64
}

type fileState struct {
	entryState
	mode int64 // the mode the mapping asked for; -1 for none
}

// racyMargin covers the coarsest host timestamps expected (FAT's 2 s; a
// Linux jiffy is 1-10 ms) and the lag of the kernel's coarse clock behind
// time.Now.
const racyMargin = 2 * time.Second

// racySince is the earliest host ctime or mtime (ns) that makes a signature
// racy for a sync started at start: a later write in the same timestamp
// granule could have left it unchanged. A time after start counts too.
func racySince(start time.Time) int64 {
	return start.Add(-racyMargin).UnixNano()
}

func (s hostSig) racy(since int64) bool {
	return s.ctime >= since || s.mtime >= since
}

// unchanged says whether the entry recorded as st can be left alone: the
// host file has the same signature, the sandbox entry its own, and, for a
// racy record, the host content now has the digest that was sent (sum reads
// it; it is called only when everything else matches, and a failure to read
// counts as changed). Sandbox-side rewrites within one timestamp granule of
// our write are not caught: that would take hashing in the sandbox.
func (st entryState) unchanged(host hostSig, sandbox string, sum func() (uint64, error)) bool {
	if st.sandbox == "" || st.host != host || sandbox != st.sandbox {
		return false
	}
	if !st.racy {
		return true
	}
	got, err := sum()
	return err == nil && got == st.sum
}

// settled is st as recorded after a sync that verified it by its digest
// (unchanged returned true): once its host times are clearly earlier than
// that sync's start, their granule had ended before the check, so any
// later write changes them and the signature suffices again.
func (st entryState) settled(since int64) entryState {
	if st.racy && !st.host.racy(since) {
		st.racy, st.sum = false, 0
	}
	return st
}

// crcTable is CRC-64/ECMA: a fast (slicing-by-8) standard library checksum
// that catches any accidental change with odds of 2^-64 of a miss. Nothing
// here is adversarial (whoever writes the host file chooses its content
// anyway), so a cryptographic hash would only cost time.
func crcTable() *crc64.Table { return crc64.MakeTable(crc64.ECMA) }

// contentSum is the digest of a host file's content as it is now; follow
// says whether a symlink at path may be opened through. Anything but a
// regular file fails.
func contentSum(path string, follow bool) (uint64, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, &os.PathError{Op: "digest", Path: path, Err: syscall.EINVAL}
	}
	h := crc64.New(crcTable())
	if _, err := io.Copy(h, f); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// linkSum is the digest of a symlink's target.
func linkSum(target string) uint64 {
	return crc64.Checksum([]byte(target), crcTable())
}

// Len reports how many entries the cache holds.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// tree returns a copy of the state recorded for a target tree.
func (c *Cache) tree(target string) map[string]entryState {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.trees[target]
	if t == nil {
		return nil
	}
	out := make(map[string]entryState, len(t.entries))
	for k, v := range t.entries {
		out[k] = v
	}
	return out
}

// setTree replaces the state of a target tree (nil forgets it).
func (c *Cache) setTree(target string, entries map[string]entryState) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.trees[target]; old != nil {
		c.held -= len(old.entries)
		delete(c.trees, target)
	}
	// Whatever a tree sync wrote replaces files synced there before.
	prefix := strings.TrimRight(target, "/") + "/"
	for k := range c.files {
		if k == target || strings.HasPrefix(k, prefix) {
			delete(c.files, k)
			c.held--
		}
	}
	for k := range c.trees {
		if strings.HasPrefix(k, prefix) {
			c.held -= len(c.trees[k].entries)
			delete(c.trees, k)
		}
	}
	if entries == nil || c.held+len(entries) > maxCachedEntries {
		return
	}
	c.trees[target] = &treeState{entries: entries}
	c.held += len(entries)
}

func (c *Cache) file(target string) (fileState, bool) {
	if c == nil {
		return fileState{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[target]
	return f, ok
}

// setFile records (ok) or forgets a file target.
func (c *Cache) setFile(target string, f fileState, ok bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, had := c.files[target]; had {
		delete(c.files, target)
		c.held--
	}
	// A file written inside a synced tree changes that tree's entry.
	for k, t := range c.trees {
		if rel, inside := strings.CutPrefix(target, strings.TrimRight(k, "/")+"/"); inside {
			if _, has := t.entries[rel]; has {
				delete(t.entries, rel)
				c.held--
			}
		}
	}
	if ok && c.held < maxCachedEntries {
		c.files[target] = f
		c.held++
	}
}

// The sandbox lists entries with GNU find: "<type> <mode> <size> <mtime>
// <ctime> <path>" NUL "<link target>" NUL per entry. A find without -printf
// (busybox) prints nothing, and everything is sent.
const (
	listingMarker    = "PAPERCLIP_SYNC_LISTING"
	treeListingFmt   = `'%y %m %s %T@ %C@ %P\0%l\0'`
	pathsListingFmt  = `'%y %m %s %T@ %C@ %p\0%l\0'`
	listingTruncator = " 2>/dev/null | head -c 8388608 2>/dev/null; true"
)

// treeListingCommand lists everything below dir; newerThan, when set, keeps
// only entries whose status changed after that file was last written.
func treeListingCommand(dir, newerThan string) string {
	cmd := "printf '" + listingMarker + "\\n'; find " + shellQuote(dir) + " -mindepth 1"
	if newerThan != "" {
		cmd += " -cnewer " + shellQuote(newerThan)
	}
	return cmd + " -printf " + treeListingFmt + listingTruncator
}

// pathsListingCommand lists the given paths themselves.
func pathsListingCommand(paths []string) string {
	var b strings.Builder
	b.WriteString("printf '" + listingMarker + "\\n'; find")
	for _, p := range paths {
		b.WriteString(" " + shellQuote(p))
	}
	b.WriteString(" -maxdepth 0 -printf " + pathsListingFmt + listingTruncator)
	return b.String()
}

// parseListing reads a listing from a command's output (what follows the
// marker). Entries whose names did not survive the trip intact (the
// toolbox's JSON replaced invalid UTF-8) are left out, so they are sent.
func parseListing(output string) map[string]string {
	_, body, ok := strings.Cut(output, listingMarker+"\n")
	if !ok {
		return nil
	}
	out := map[string]string{}
	fields := strings.Split(body, "\x00")
	// A record counts only when its link field was terminated (the output
	// may have been cut short).
	for i := 0; i+2 < len(fields); i += 2 {
		head, link := fields[i], fields[i+1]
		var sig [5]string
		rest := head
		ok := true
		for j := range sig {
			var f string
			f, rest, ok = strings.Cut(rest, " ")
			if !ok {
				break
			}
			sig[j] = f
		}
		if !ok || rest == "" || strings.ContainsRune(rest, '\uFFFD') || strings.ContainsRune(link, '\uFFFD') {
			continue
		}
		out[rest] = strings.Join(sig[:], " ") + "\x00" + link
	}
	return out
}
