package emulator

import (
	"net/http"
)

// toolboxHandler handles a toolbox route for one resolved, reachable sandbox.
type toolboxHandler func(w http.ResponseWriter, r *http.Request, sb *sandbox)

func (s *Server) routes() {
	mux := http.NewServeMux()
	s.mux = mux
	api := func(pattern string, h http.HandlerFunc) {
		method, path := splitPattern(pattern)
		mux.HandleFunc(method+" /api"+path, h)
	}
	tb := func(pattern string, h toolboxHandler) {
		method, path := splitPattern(pattern)
		mux.HandleFunc(method+" /toolbox/{sandboxId}"+path, s.toolbox(h))
	}

	mux.HandleFunc("/", s.unhandled)

	// Control plane.
	api("GET /config", s.handleConfig)
	api("POST /sandbox", s.handleCreate)
	api("GET /sandbox", s.handleList)
	// Express routes are not strict: the service answers /sandbox/ as
	// /sandbox, which is where an SDK call with an empty id lands.
	api("GET /sandbox/{$}", s.handleList)
	api("GET /sandbox/{idOrName}", s.handleGet)
	api("DELETE /sandbox/{idOrName}", s.handleDelete)
	api("POST /sandbox/{idOrName}/start", s.handleStart)
	api("POST /sandbox/{idOrName}/stop", s.handleStop)
	api("POST /sandbox/{idOrName}/archive", s.handleArchive)
	api("POST /sandbox/{idOrName}/recover", s.handleRecover)
	api("POST /sandbox/{idOrName}/pause", s.handlePause)
	api("POST /sandbox/{idOrName}/autostop/{interval}", s.handleInterval(intervalAutoStop))
	api("POST /sandbox/{idOrName}/autoarchive/{interval}", s.handleInterval(intervalAutoArchive))
	api("POST /sandbox/{idOrName}/autodelete/{interval}", s.handleInterval(intervalAutoDelete))
	api("POST /sandbox/{idOrName}/autopause/{interval}", s.handleInterval(intervalAutoPause))
	api("POST /sandbox/{idOrName}/ttl/{interval}", s.handleInterval(intervalTTL))
	api("PUT /sandbox/{idOrName}/labels", s.handleLabels)
	api("POST /sandbox/{idOrName}/public/{isPublic}", s.handlePublic)
	api("POST /sandbox/{idOrName}/network-settings", s.handleNetworkSettings)
	api("POST /sandbox/{sandboxId}/last-activity", s.handleLastActivity)
	api("GET /sandbox/{sandboxId}/toolbox-proxy-url", s.handleToolboxProxyURL)
	api("GET /sandbox/{idOrName}/ports/{port}/preview-url", s.handlePreviewURL)
	api("GET /sandbox/{idOrName}/ports/{port}/signed-preview-url", s.handleSignedPreviewURL)
	api("POST /sandbox/{idOrName}/ssh-access", s.handleCreateSSH)
	api("DELETE /sandbox/{idOrName}/ssh-access", s.handleRevokeSSH)
	api("GET /sandbox/ssh-access/validate", s.handleValidateSSH)
	api("POST /sandbox/{idOrName}/snapshot", s.handleSandboxSnapshot)
	api("GET /sandbox/{idOrName}/build-logs-url", s.handleBuildLogsURL)
	api("GET /sandbox/{idOrName}/build-logs", s.handleBuildLogs)
	api("GET /snapshots", s.handleListSnapshots)
	api("POST /snapshots", s.handleCreateSnapshot)
	api("GET /snapshots/{idOrName}", s.handleGetSnapshot)
	api("DELETE /snapshots/{id}", s.handleDeleteSnapshot)

	// Toolbox (the in-sandbox daemon, reached through the proxy).
	tb("GET /work-dir", s.handleWorkDir)
	tb("GET /user-home-dir", s.handleHomeDir)
	tb("GET /project-dir", s.handleHomeDir)
	tb("GET /version", s.handleVersion)
	tb("POST /env", s.handleUpdateEnv)
	tb("POST /process/execute", s.handleExecute)
	tb("POST /process/session", s.handleCreateSession)
	tb("GET /process/session", s.handleListSessions)
	tb("GET /process/session/entrypoint", s.handleEntrypointSession)
	tb("GET /process/session/entrypoint/logs", s.handleEntrypointLogs)
	tb("GET /process/session/{sessionId}", s.handleGetSession)
	tb("DELETE /process/session/{sessionId}", s.handleDeleteSession)
	tb("POST /process/session/{sessionId}/exec", s.handleSessionExec)
	tb("GET /process/session/{sessionId}/command/{commandId}", s.handleGetCommand)
	tb("GET /process/session/{sessionId}/command/{commandId}/logs", s.handleCommandLogs)
	tb("POST /process/session/{sessionId}/command/{commandId}/input", s.handleCommandInput)
	tb("POST /process/pty", s.handleCreatePty)
	tb("GET /process/pty", s.handleListPty)
	tb("GET /process/pty/create-connect", s.handlePtyCreateConnect)
	tb("GET /process/pty/{sessionId}", s.handleGetPty)
	tb("DELETE /process/pty/{sessionId}", s.handleDeletePty)
	tb("POST /process/pty/{sessionId}/resize", s.handleResizePty)
	tb("GET /process/pty/{sessionId}/connect", s.handlePtyConnect)
	tb("GET /files", s.handleListFiles)
	tb("DELETE /files", s.handleDeleteFile)
	tb("GET /files/info", s.handleFileInfo)
	tb("POST /files/folder", s.handleCreateFolder)
	tb("GET /files/download", s.handleDownload)
	tb("POST /files/bulk-download", s.handleBulkDownload)
	tb("POST /files/upload", s.handleUpload)
	tb("POST /files/upload-v2", s.handleUpload)
	tb("POST /files/bulk-upload", s.handleBulkUpload)
	tb("POST /files/move", s.handleMove)
	tb("POST /files/permissions", s.handlePermissions)
	tb("GET /files/find", s.handleFind)
	tb("GET /files/search", s.handleSearch)
	tb("POST /files/replace", s.handleReplace)

	s.adminRoutes(mux)
}

func splitPattern(p string) (method, path string) {
	for i := 0; i < len(p); i++ {
		if p[i] == ' ' {
			return p[:i], p[i+1:]
		}
	}
	return "", p
}
