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
// With a Cache, a second sync in of the same trees into the same sandbox
// sends only what changed since the first (see Cache).
//
// The package is named sync after its folder; callers that also need the
// standard library's sync import it under another name (filesync).
package sync
