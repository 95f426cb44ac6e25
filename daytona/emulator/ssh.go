package emulator

import (
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
)

const sshGatewayHost = "ssh.app.daytona.io"

type sshAccess struct {
	id        string
	sandboxID string
	token     string
	expiresAt time.Time
	createdAt time.Time
}

// handleCreateSSH issues a token; creating one revokes every earlier token of
// the sandbox, as the real API does.
func (s *Server) handleCreateSSH(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	minutes := 60
	if v := r.URL.Query().Get("expiresInMinutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.apiError(w, r, http.StatusBadRequest, "expiresInMinutes must be a positive integer")
			return
		}
		minutes = n
	}
	s.mu.Lock()
	for tok, a := range s.sshAccess {
		if a.sandboxID == sb.id {
			delete(s.sshAccess, tok)
		}
	}
	now := s.nowLocked()
	a := &sshAccess{
		id:        uuid.NewString(),
		sandboxID: sb.id,
		token:     token(32),
		expiresAt: now.Add(time.Duration(minutes) * time.Minute),
		createdAt: now,
	}
	s.sshAccess[a.token] = a
	s.issueSecretLocked(a.token)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, sshAccessJSON{
		ID:         a.id,
		SandboxID:  a.sandboxID,
		Token:      a.token,
		ExpiresAt:  isoTime(a.expiresAt),
		CreatedAt:  isoTime(a.createdAt),
		UpdatedAt:  isoTime(a.createdAt),
		SSHCommand: "ssh " + a.token + "@" + sshGatewayHost,
	})
}

// handleRevokeSSH revokes one token (?token=) or all of the sandbox's tokens
// and answers with the Sandbox.
func (s *Server) handleRevokeSSH(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	only := r.URL.Query().Get("token")
	s.mu.Lock()
	for tok, a := range s.sshAccess {
		if a.sandboxID == sb.id && (only == "" || only == tok) {
			delete(s.sshAccess, tok)
		}
	}
	s.mu.Unlock()
	s.replySandbox(w, r, http.StatusOK, sb)
}

func (s *Server) handleValidateSSH(w http.ResponseWriter, r *http.Request) {
	tok := r.URL.Query().Get("token")
	s.mu.Lock()
	a := s.sshAccess[tok]
	valid := a != nil && s.nowLocked().Before(a.expiresAt)
	s.mu.Unlock()
	if !valid {
		writeJSON(w, http.StatusOK, map[string]any{"valid": false, "sandboxId": nil})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"valid": true, "sandboxId": a.sandboxID})
}

// SSHAccessView describes a live SSH token.
type SSHAccessView struct {
	SandboxID string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// SSHAccess reports a token that is still on record (not revoked, its
// sandbox not deleted), expired or not.
func (s *Server) SSHAccess(token string) (SSHAccessView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.sshAccess[token]
	if a == nil {
		return SSHAccessView{}, false
	}
	return SSHAccessView{SandboxID: a.sandboxID, CreatedAt: a.createdAt, ExpiresAt: a.expiresAt}, true
}
