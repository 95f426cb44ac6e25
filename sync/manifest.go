package sync

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// entryState is the record of one synced entry: the host file's signature
// when it was read and the sandbox entry's signature right after it landed
// (see the package doc, "Incremental sync in").
type entryState struct {
	host    hostSig
	sandbox string // "<type> <mode> <size> <mtime> <ctime> <inode>" NUL "<link target>"; "" not yet known
	// racy: the host signature was taken within racyMargin of the sync's
	// start, so a same-size rewrite right after the read may have kept it;
	// sum is then the CRC-64 of the content (or link target) sent.
	racy bool
	sum  uint64
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

// The sandbox lists entries with GNU find: "<type> <mode> <size> <mtime>
// <ctime> <inode> <path>" NUL "<link target>" NUL per entry. A find without
// -printf (busybox) prints nothing, and everything is sent.
const (
	listingMarker    = "PAPERCLIP_SYNC_LISTING"
	treeListingFmt   = `'%y %m %s %T@ %C@ %i %P\0%l\0'`
	pathsListingFmt  = `'%y %m %s %T@ %C@ %i %p\0%l\0'`
	listingTruncator = " 2>/dev/null | head -c 8388608 2>/dev/null; true"
	sandboxSigFields = 6
)

// treeFind lists everything below dir, without a marker or a bound;
// newerThan, when set, keeps only entries whose status changed after that
// file was last written.
func treeFind(dir, newerThan string) string {
	cmd := "find " + shellQuote(dir) + " -mindepth 1"
	if newerThan != "" {
		cmd += " -cnewer " + shellQuote(newerThan)
	}
	return cmd + " -printf " + treeListingFmt
}

// treeListingCommand is treeFind after the marker, bounded.
func treeListingCommand(dir string) string {
	return "printf '" + listingMarker + "\\n'; " + treeFind(dir, "") + listingTruncator
}

// pathsFind lists the given paths themselves.
func pathsFind(paths []string) string {
	var b strings.Builder
	b.WriteString("find")
	for _, p := range paths {
		b.WriteString(" " + shellQuote(p))
	}
	b.WriteString(" -maxdepth 0 -printf " + pathsListingFmt)
	return b.String()
}

// pathsListingCommand is pathsFind after the marker, bounded.
func pathsListingCommand(paths []string) string {
	return "printf '" + listingMarker + "\\n'; " + pathsFind(paths) + listingTruncator
}

// parseListing reads a listing from a command's output (what follows the
// marker).
func parseListing(output string) map[string]string {
	_, body, ok := strings.Cut(output, listingMarker+"\n")
	if !ok {
		return nil
	}
	return parseListingRecords(body)
}

// parseListingRecords reads listing records. Entries whose names did not
// survive the trip intact (the toolbox's JSON replaced invalid UTF-8) are
// left out, so they are sent.
func parseListingRecords(body string) map[string]string {
	out := map[string]string{}
	// A record counts only when its link field was terminated (the output
	// may have been cut short).
	for {
		head, rest, ok := strings.Cut(body, "\x00")
		if !ok {
			break
		}
		link, rest, ok := strings.Cut(rest, "\x00")
		if !ok {
			break
		}
		body = rest
		sig, name, ok := splitFields(head, sandboxSigFields)
		if !ok || name == "" || strings.ContainsRune(name, '\uFFFD') || strings.ContainsRune(link, '\uFFFD') {
			continue
		}
		out[name] = sig + "\x00" + link
	}
	return out
}

// splitFields splits s after its first n space-separated fields.
func splitFields(s string, n int) (fields, rest string, ok bool) {
	i := 0
	for j := 0; j < n; j++ {
		k := strings.IndexByte(s[i:], ' ')
		if k <= 0 {
			return "", "", false
		}
		i += k + 1
	}
	return s[:i-1], s[i:], true
}

// The manifest of a target (see "Incremental sync in" in the package doc)
// is NUL-terminated fields:
//
//	manifestFormat
//	identity: JSON of manifestIdentity
//	"<entries> <CRC-64 of the entry fields, hex>"
//	per entry: path, host signature, digest ("-" unless racy), sandbox
//	  signature ("-": in the listing below), sandbox link target
//	listing records of what the sync wrote (see treeListingFmt)
//
// The worker uploads all but the listing, which the sandbox appends.
const (
	manifestFormat   = "paperclip-sync-manifest 1"
	manifestDir      = ".cache/paperclip-daytona-sync" // below $HOME
	manifestMarker   = "PAPERCLIP_SYNC_MANIFEST"
	maxManifestBytes = 32 << 20
	manifestFields   = 5
	pendingSandbox   = "-"
	// maxTreeEntries bounds the trees that keep a manifest; a larger one is
	// always sent whole.
	maxTreeEntries = 100_000
)

// manifestIdentity is what a manifest describes; a manifest is used only
// for the very same.
type manifestIdentity struct {
	Sandbox string   `json:"sandbox"`
	Kind    string   `json:"kind"`
	Target  string   `json:"target"`
	Source  string   `json:"source"`
	Exclude []string `json:"exclude"`
	Follow  bool     `json:"follow"`
	Mode    int64    `json:"mode"`
}

func identityOf(sandboxID string, m Mapping) string {
	id := manifestIdentity{
		Sandbox: sandboxID, Kind: m.Kind, Target: m.TargetPath, Source: m.SourcePath,
		Exclude: m.Exclude, Follow: m.FollowSymlinks || m.Kind == KindFile, Mode: modeKey(m),
	}
	b, _ := json.Marshal(id)
	return string(b)
}

// manifestName is the name of a target's manifest in the folder.
func manifestName(target string) string {
	sum := sha256.Sum256([]byte(target))
	return hex.EncodeToString(sum[:])
}

// manifestTemp is where a sync uploads a manifest before it is complete:
// named after one of the sync's own scratch names, so it is unique.
func manifestTemp(dir, scratch string) string {
	return dir + "/" + path.Base(scratch) + ".manifest"
}

// manifestWriter builds the part of a manifest the worker uploads.
type manifestWriter struct {
	identity string
	entries  bytes.Buffer
	n        int
}

// add records an entry; st.sandbox "" means the listing appended in the
// sandbox tells it. Names the toolbox cannot carry intact are left out.
func (w *manifestWriter) add(rel string, st entryState) {
	if !utf8.ValidString(rel) || !utf8.ValidString(st.sandbox) {
		return
	}
	h := st.host
	racy := "-"
	if st.racy {
		racy = strconv.FormatUint(st.sum, 16)
	}
	sig, link := pendingSandbox, ""
	if st.sandbox != "" {
		sig, link, _ = strings.Cut(st.sandbox, "\x00")
	}
	fmt.Fprintf(&w.entries, "%s\x00%d %d %d %d %d %d %d %d\x00%s\x00%s\x00%s\x00",
		rel, h.dev, h.ino, h.size, h.mtime, h.ctime, h.mode, h.kind, h.nlink, racy, sig, link)
	w.n++
}

func (w *manifestWriter) bytes() []byte {
	var b bytes.Buffer
	b.WriteString(manifestFormat + "\x00" + w.identity + "\x00")
	fmt.Fprintf(&b, "%d %x\x00", w.n, crc64.Checksum(w.entries.Bytes(), crcTable()))
	b.Write(w.entries.Bytes())
	return b.Bytes()
}

// parseManifest reads a manifest: the records of the target with that
// identity, with the sandbox signature of each entry written by the sync
// that left it taken from the listing appended to it (entries it does not
// show are left out). Anything else gives nil.
func parseManifest(m, identity string, follow bool) map[string]entryState {
	next := func() (string, bool) {
		f, rest, ok := strings.Cut(m, "\x00")
		m = rest
		return f, ok
	}
	if f, ok := next(); !ok || f != manifestFormat {
		return nil
	}
	if f, ok := next(); !ok || f != identity {
		return nil
	}
	counts, ok := next()
	if !ok {
		return nil
	}
	var n int
	var sum uint64
	if _, err := fmt.Sscanf(counts, "%d %x", &n, &sum); err != nil || n < 0 || n > len(m)/manifestFields {
		return nil
	}
	body := m
	type record struct {
		rel string
		st  entryState
	}
	records := make([]record, 0, n)
	for i := 0; i < n; i++ {
		var f [manifestFields]string
		for j := range f {
			if f[j], ok = next(); !ok {
				return nil
			}
		}
		host, ok := parseHostSig(f[1], follow)
		if !ok || f[0] == "" {
			return nil
		}
		st := entryState{host: host}
		if f[2] != "-" {
			if st.sum, ok = parseHex(f[2]); !ok {
				return nil
			}
			st.racy = true
		}
		if f[3] != pendingSandbox {
			st.sandbox = f[3] + "\x00" + f[4]
		}
		records = append(records, record{f[0], st})
	}
	if crc64.Checksum([]byte(body[:len(body)-len(m)]), crcTable()) != sum {
		return nil
	}
	written := parseListingRecords(m)
	out := make(map[string]entryState, len(records))
	for _, r := range records {
		if r.st.sandbox == "" {
			sig, ok := written[r.rel]
			if !ok {
				continue
			}
			r.st.sandbox = sig
		}
		out[r.rel] = r.st
	}
	return out
}

func parseHostSig(s string, follow bool) (hostSig, bool) {
	var h hostSig
	var kind uint8
	if _, err := fmt.Sscanf(s, "%d %d %d %d %d %d %d %d", &h.dev, &h.ino, &h.size, &h.mtime, &h.ctime, &h.mode, &kind, &h.nlink); err != nil {
		return hostSig{}, false
	}
	h.kind, h.followedLinks = kind, follow
	return h, true
}

func parseHex(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 16, 64)
	return v, err == nil
}

// manifestReadScript prints, after manifestMarker, the manifest folder
// (created; empty when there is none outside the workspace) and then, per
// name, the size of that manifest and the manifest itself (size 0 when it
// is missing or too large). It never fails.
func manifestReadScript(remoteDir string, names []string) string {
	var b strings.Builder
	// The folder is checked against the workspace before it is created and
	// again once its physical path is known.
	b.WriteString(`pc_md=; pc_ws=$(cd -P ` + shellQuote(remoteDir) + ` 2>/dev/null && pwd) && case "${HOME:-}" in /*) ` +
		`pc_h=$(cd -P "$HOME" 2>/dev/null && pwd) && case "$pc_h/` + manifestDir + `/" in "${pc_ws%/}"/*) ;; *) ` +
		`mkdir -p "$pc_h/` + manifestDir + `" 2>/dev/null && pc_md=$(cd -P "$pc_h/` + manifestDir + `" 2>/dev/null && pwd) && ` +
		`case "$pc_md/" in "${pc_ws%/}"/*) pc_md=;; esac;; esac;; esac; `)
	// Temps a sync left behind (its worker died before the extract) go
	// once they are a day old, long past any transfer's timeout.
	b.WriteString(`[ -n "$pc_md" ] && find "$pc_md" -maxdepth 1 -name '` + scratchPrefix + `-*.manifest' -mmin +1440 -exec rm -f {} + 2>/dev/null; `)
	b.WriteString(`printf '` + manifestMarker + `\000%s\000' "$pc_md"; for pc_n in`)
	for _, n := range names {
		b.WriteString(" " + shellQuote(n))
	}
	fmt.Fprintf(&b, `; do pc_s=0; if [ -n "$pc_md" ] && [ -f "$pc_md/$pc_n" ]; then pc_s=$(wc -c < "$pc_md/$pc_n" | tr -d ' '); `+
		`[ "$pc_s" -le %d ] 2>/dev/null || pc_s=0; fi; printf '%%s\000' "$pc_s"; `+
		`if [ "$pc_s" != 0 ]; then cat "$pc_md/$pc_n"; fi; done; `, maxManifestBytes)
	return b.String()
}

// parseManifestRead splits the output of manifestReadScript (followed by a
// listing) into the folder, the manifests in order, and what follows them.
// When the output is not what the script prints (a manifest the toolbox
// could not carry intact, or that changed size while it was read), ok is
// false and only the folder is known.
func parseManifestRead(out string, n int) (dir string, manifests []string, rest string, ok bool) {
	_, out, ok = strings.Cut(out, manifestMarker+"\x00")
	if !ok {
		return "", nil, "", false
	}
	if dir, out, ok = strings.Cut(out, "\x00"); !ok || (dir != "" && !strings.HasPrefix(dir, "/")) {
		return "", nil, "", false
	}
	for i := 0; i < n; i++ {
		var size string
		if size, out, ok = strings.Cut(out, "\x00"); !ok {
			return dir, nil, "", false
		}
		k, err := strconv.Atoi(size)
		if err != nil || k < 0 || k > len(out) {
			return dir, nil, "", false
		}
		manifests = append(manifests, out[:k])
		out = out[k:]
	}
	if !strings.HasPrefix(out, listingMarker+"\n") {
		return dir, nil, "", false
	}
	return dir, manifests, out, true
}

// manifestFinishScript completes a manifest the sync uploaded to temp: it
// appends find's listing and renames the temp over the manifest, or removes
// it. A failure here fails nothing: what it could not record is sent again.
func manifestFinishScript(temp, final, find string) string {
	qt := shellQuote(temp)
	return find + " >> " + qt + " 2>/dev/null; mv -f " + qt + " " + shellQuote(final) + " 2>/dev/null || rm -f " + qt + " 2>/dev/null || :;"
}
