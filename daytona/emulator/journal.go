package emulator

import "slices"

// ToolboxCall is one file-transfer or command request a sandbox received,
// as the journal keeps it, so tests can check what a client asked for and
// in which order.
type ToolboxCall struct {
	// Route is "execute", "bulk-upload", "bulk-download", "upload",
	// "download", "permissions" or "delete".
	Route string
	// Command, Cwd and Timeout (seconds) of an execute.
	Command string
	Cwd     string
	Timeout int
	// Paths a transfer named, in request order; the path of a single-file call.
	Paths []string
	// Mode of a permissions call.
	Mode string
}

// maxJournal bounds the calls kept per sandbox (the oldest are dropped).
const maxJournal = 10_000

// Journal returns the toolbox calls a sandbox received, oldest first.
func (s *Server) Journal(sandboxID string) []ToolboxCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[sandboxID]; sb != nil {
		return slices.Clone(sb.journal)
	}
	return nil
}

// ResetJournal forgets a sandbox's calls.
func (s *Server) ResetJournal(sandboxID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[sandboxID]; sb != nil {
		sb.journal = nil
	}
}

func (s *Server) journal(sandboxID string, c ToolboxCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[sandboxID]
	if sb == nil {
		return
	}
	if len(sb.journal) >= maxJournal {
		sb.journal = slices.Delete(sb.journal, 0, len(sb.journal)-maxJournal+1)
	}
	sb.journal = append(sb.journal, c)
}

func (s *Server) journalExecute(sandboxID, command, cwd string, timeout int) {
	s.journal(sandboxID, ToolboxCall{Route: "execute", Command: command, Cwd: cwd, Timeout: timeout})
}
