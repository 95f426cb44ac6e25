package emulator

import (
	"net/http"
	"strings"
)

// The three error shapes of the real service, one writer each.

// apiError writes the control plane's NestJS error body:
// {"path","timestamp","statusCode","error","message"}.
func (s *Server) apiError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"path":       r.URL.Path,
		"timestamp":  isoTime(s.now()),
		"statusCode": status,
		"error":      http.StatusText(status),
		"message":    msg,
	})
}

// toolboxCodes maps statuses to the common-go error codes.
var toolboxCodes = map[int]string{
	http.StatusBadRequest:          "BAD_REQUEST",
	http.StatusUnauthorized:        "UNAUTHORIZED",
	http.StatusForbidden:           "FORBIDDEN",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusRequestTimeout:      "REQUEST_TIMEOUT",
	http.StatusConflict:            "CONFLICT",
	http.StatusGone:                "GONE",
	http.StatusUnprocessableEntity: "UNPROCESSABLE_ENTITY",
	http.StatusInternalServerError: "INTERNAL_SERVER_ERROR",
}

// toolboxError writes the daemon's structured (common-go) error body:
// {"statusCode","message","code","timestamp","path","method"}. The path is the
// daemon-local one (without /toolbox/{sandboxId}), as the daemon sees it.
func (s *Server) toolboxError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	code, ok := toolboxCodes[status]
	if !ok {
		code = strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	}
	writeJSON(w, status, map[string]any{
		"statusCode": status,
		"message":    msg,
		"code":       code,
		"timestamp":  isoTime(s.now()),
		"path":       daemonPath(r.URL.Path),
		"method":     r.Method,
	})
}

// bareStatus answers like gin's AbortWithError: a status with an empty body.
func bareStatus(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
}

// ptyError answers in the PTY handlers' {"error": "..."} shape.
func ptyError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// daemonPath strips "/toolbox/{sandboxId}" from a toolbox path.
func daemonPath(p string) string {
	rest, ok := strings.CutPrefix(p, "/toolbox/")
	if !ok {
		return p
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[i:]
	}
	return "/"
}

// refuseLocked releases s.mu and answers with a control-plane error: the
// common ending of a lifecycle call whose precondition fails. s.mu must be
// held.
func (s *Server) refuseLocked(w http.ResponseWriter, r *http.Request, status int, message string) {
	s.mu.Unlock()
	s.apiError(w, r, status, message)
}
