package sync

import (
	"strings"
	stdsync "sync"
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
// (which no user can set), so a changed file is never skipped. An entry the
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
}

type fileState struct {
	host    hostSig
	mode    int64 // the mode the mapping asked for; -1 for none
	sandbox string
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
