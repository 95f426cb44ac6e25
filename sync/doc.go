// Package sync moves files between the host and a Daytona sandbox for the
// worker's environmentSyncIn and environmentSyncOut methods, with the
// observable behaviour of the Daytona plugin's file-sync module (commands,
// scratch names, error messages, counts, spans) and flat memory.
//
// It is a library: it knows Daytona only through the daytona package (the
// Sandbox interface is a subset of *daytona.Toolbox) and the host only
// through the paths it is given and the Tracer it reports spans to.
//
// Sync in (host → sandbox), per operation, in order:
//   - file mappings go as one batch: one mkdir round trip, one bulk upload to
//     reserved <remoteDir>/.paperclip-upload-<uuid> temps, modes set on the
//     temps, one `mv -f` script that promotes them; temps are swept on any
//     failure;
//   - each directory mapping is a gzip tar produced on the host while it is
//     uploaded (honouring exclude and followSymlinks), extracted by one quoted
//     `tar -xf` in the sandbox; read-only bundles first compare what is
//     already there;
//   - post-upload commands run verbatim, in order, fail fast.
//
// Sync out (sandbox → host): file mappings are validated and snapshotted in
// the sandbox by one guard script, downloaded in one batch into temps beside
// their targets, given their mode and renamed into place only when every
// download succeeded; a directory is tarred in the sandbox and downloaded
// straight into a validating extractor that stages every entry beside the
// target and moves it into place only once the whole archive was checked.
//
// # Incremental sync in
//
// With Config.SandboxID set, a sync in sends only what changed since the
// last sync of the same mapping into the same sandbox, whichever worker
// process made it: the record lives in the sandbox, not in the worker.
//
// Where: one manifest per target, $HOME/.cache/paperclip-daytona-sync/
// <sha256 of the target path> in the sandbox user's home, outside the
// workspace. The folder is used only when its physical path (symlinks
// resolved) is not below the workspace's, checked before it is created and
// after, so no sync out or listing of the workspace ever shows a manifest;
// where the workspace holds the home, no manifest is kept and every sync
// is a full one. The worker keeps nothing per lease.
//
// What: a header naming the format version, the sandbox, the target and
// the mapping (kind, source, exclude, followSymlinks, mode), then per
// entry the host file's signature when it was read (device, inode, size,
// mtime, ctime, mode, type, link count), a CRC-64 of what was sent when
// that signature was racy, and the sandbox entry's signature right after
// it landed (type, mode, size, mtime, ctime, inode, link target).
//
// How: the sync that creates the target (its mkdir round trip) also
// prints the manifest and lists the target. An entry is skipped only when
// the host file still has its signature and the sandbox entry still has
// its own. Any write, chmod, rename or replacement on either side changes
// a ctime (which no user can set) or an inode, so a changed file is never
// skipped, with one exception handled apart: where timestamps are coarse
// (Linux before 6.13 advances them once per jiffy, FAT every 2 s), a
// same-size rewrite in the granule of the read leaves the host signature
// as it was. An entry whose host signature was that close to the sync is
// recorded as racy, with a digest of what was sent, and is skipped later
// only if the host content still has that digest (as Git does for its
// racily clean index entries). Sandbox-side rewrites within one timestamp
// granule of our write are not caught: that would take hashing in the
// sandbox. What a full sync would leave alone (sandbox files the host does
// not have) stays as it is, exactly as `tar -xf` leaves it.
//
// The manifest is written without a round trip of its own, atomically:
// the worker uploads its part (header, host signatures, digests, and the
// sandbox signatures of entries not sent) beside the tarball or files, as
// a temp in the manifest folder; the extract or promote script appends the
// sandbox's listing of what it wrote and renames the temp over the
// manifest. A missing, damaged (entry count and CRC-64 in the header),
// foreign or older-format manifest means a full sync, never an error; a
// manifest is rewritten only when something changed. Nothing in it is
// trusted over the sandbox: a record only lets an entry be skipped when
// the sandbox still shows what was written. A tree of more than
// maxTreeEntries entries keeps no manifest.
//
// The package is named sync after its folder; callers that also need the
// standard library's sync import it under another name (filesync).
package sync
