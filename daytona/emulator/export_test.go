package emulator

// SetAfterPtyConnected installs a hook run once a PTY client has been sent
// "connected" and before its output flows (see Server.afterPtyConnected).
func (s *Server) SetAfterPtyConnected(fn func(sandboxID, ptyID string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterPtyConnected = fn
}
