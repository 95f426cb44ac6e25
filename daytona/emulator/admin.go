package emulator

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// faultJSON is Fault on the admin API; durations are Go duration strings.
type faultJSON struct {
	ID                      int        `json:"id,omitempty"`
	Method                  string     `json:"method,omitempty"`
	Path                    string     `json:"path,omitempty"`
	SandboxID               string     `json:"sandboxId,omitempty"`
	Times                   int        `json:"times,omitempty"`
	Left                    int        `json:"left,omitempty"`
	Latency                 string     `json:"latency,omitempty"`
	Status                  int        `json:"status,omitempty"`
	Body                    string     `json:"body,omitempty"`
	EmptyBody               bool       `json:"emptyBody,omitempty"`
	RetryAfter              string     `json:"retryAfter,omitempty"`
	Hang                    bool       `json:"hang,omitempty"`
	DropWebSocketAfterBytes int        `json:"dropWebSocketAfterBytes,omitempty"`
	Command                 string     `json:"command,omitempty"`
	Reply                   *ExecReply `json:"reply,omitempty"`
	HalfOpenAfterEnd        bool       `json:"halfOpenAfterEnd,omitempty"`
	ExitCodeDelay           string     `json:"exitCodeDelay,omitempty"`
	Reset                   bool       `json:"reset,omitempty"`
	ResetAfterBytes         int        `json:"resetAfterBytes,omitempty"`
	SlowBody                string     `json:"slowBody,omitempty"`
	SlowBodyChunk           int        `json:"slowBodyChunk,omitempty"`
}

func (s *Server) adminRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /_emulator/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Sandboxes())
	})
	mux.HandleFunc("GET /_emulator/pty-sessions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.PTYSessionIDs())
	})
	mux.HandleFunc("GET /_emulator/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.Sandbox(r.PathValue("id"))
		if !ok {
			s.apiError(w, r, http.StatusNotFound, "no such sandbox")
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("POST /_emulator/sandboxes/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		s.adminResult(w, r, s.StopBehindClientsBack(r.PathValue("id")))
	})
	mux.HandleFunc("POST /_emulator/sandboxes/{id}/error", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Reason      string `json:"reason"`
			Recoverable bool   `json:"recoverable"`
		}
		if !s.decodeJSON(w, r, &req) {
			return
		}
		s.adminResult(w, r, s.SetError(r.PathValue("id"), req.Reason, req.Recoverable))
	})
	mux.HandleFunc("POST /_emulator/sandboxes/{id}/missing-container", func(w http.ResponseWriter, r *http.Request) {
		s.adminResult(w, r, s.SetMissingContainer(r.PathValue("id")))
	})
	mux.HandleFunc("GET /_emulator/faults", func(w http.ResponseWriter, r *http.Request) {
		out := []faultJSON{}
		for _, fi := range s.Faults() {
			fj := toFaultJSON(fi.Fault)
			fj.ID, fj.Left = fi.ID, fi.Left
			out = append(out, fj)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_emulator/faults", func(w http.ResponseWriter, r *http.Request) {
		var fj faultJSON
		if !s.decodeJSON(w, r, &fj) {
			return
		}
		f, err := fromFaultJSON(fj)
		if err != nil {
			s.apiError(w, r, http.StatusBadRequest, err.Error())
			return
		}
		id, err := s.addFault(f)
		if err != nil {
			s.apiError(w, r, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, map[string]int{"id": id})
	})
	mux.HandleFunc("DELETE /_emulator/faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /_emulator/faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil {
			s.apiError(w, r, http.StatusBadRequest, "fault id must be an integer")
			return
		}
		s.RemoveFault(id)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_emulator/requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Requests())
	})
	mux.HandleFunc("DELETE /_emulator/requests", func(w http.ResponseWriter, r *http.Request) {
		s.ResetRequests()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_emulator/reap", func(w http.ResponseWriter, r *http.Request) {
		s.Reap()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_emulator/clock", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Advance string `json:"advance"`
		}
		if !s.decodeJSON(w, r, &req) {
			return
		}
		d, err := time.ParseDuration(req.Advance)
		if err != nil || d < 0 {
			s.apiError(w, r, http.StatusBadRequest, "advance must be a non-negative Go duration, e.g. \"90m\"")
			return
		}
		s.AdvanceClock(d)
		writeJSON(w, http.StatusOK, map[string]string{"now": isoTime(s.now())})
	})
	mux.HandleFunc("GET /_emulator/processes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int{"live": s.LiveProcesses()})
	})
	mux.HandleFunc("POST /_emulator/snapshot-faults", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			SandboxID string `json:"sandboxId"`
			Times     int    `json:"times"`
			Hold      string `json:"hold"`
			Outcome   string `json:"outcome"`
			Reason    string `json:"reason"`
		}
		if !s.decodeJSON(w, r, &req) {
			return
		}
		f := SnapshotFault{SandboxID: req.SandboxID, Times: req.Times, Outcome: SnapshotOutcome(req.Outcome), Reason: req.Reason}
		switch f.Outcome {
		case SnapshotSucceeds, SnapshotJobFails, SnapshotSandboxErrors:
		default:
			s.apiError(w, r, http.StatusBadRequest, `outcome must be "", "fail" or "error"`)
			return
		}
		if req.Hold != "" {
			d, err := time.ParseDuration(req.Hold)
			if err != nil || d < 0 {
				s.apiError(w, r, http.StatusBadRequest, "hold must be a non-negative Go duration, e.g. \"3s\"")
				return
			}
			f.Hold = d
		}
		s.AddSnapshotFault(f)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /_emulator/snapshot-faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearSnapshotFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_emulator/snapshots", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Snapshots())
	})
	mux.HandleFunc("GET /_emulator/secrets", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.IssuedSecrets())
	})
}

func (s *Server) adminResult(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrNotFound):
		s.apiError(w, r, http.StatusNotFound, err.Error())
	default:
		s.apiError(w, r, http.StatusInternalServerError, err.Error())
	}
}

func toFaultJSON(f Fault) faultJSON {
	fj := faultJSON{
		Method: f.Method, Path: f.Path, SandboxID: f.SandboxID, Times: f.Times, Status: f.Status,
		Body: f.Body, EmptyBody: f.EmptyBody, RetryAfter: f.RetryAfter, Hang: f.Hang, DropWebSocketAfterBytes: f.DropWebSocketAfterBytes,
		Command: f.Command, Reply: f.Reply,
		HalfOpenAfterEnd: f.HalfOpenAfterEnd,
		Reset:            f.Reset, ResetAfterBytes: f.ResetAfterBytes, SlowBodyChunk: f.SlowBodyChunk,
	}
	if f.SlowBody > 0 {
		fj.SlowBody = f.SlowBody.String()
	}
	if f.Latency > 0 {
		fj.Latency = f.Latency.String()
	}
	if f.ExitCodeDelay > 0 {
		fj.ExitCodeDelay = f.ExitCodeDelay.String()
	}
	return fj
}

func fromFaultJSON(fj faultJSON) (Fault, error) {
	f := Fault{
		Method: fj.Method, Path: fj.Path, SandboxID: fj.SandboxID, Times: fj.Times, Status: fj.Status,
		Body: fj.Body, EmptyBody: fj.EmptyBody, RetryAfter: fj.RetryAfter, Hang: fj.Hang, DropWebSocketAfterBytes: fj.DropWebSocketAfterBytes,
		Command: fj.Command, Reply: fj.Reply,
		HalfOpenAfterEnd: fj.HalfOpenAfterEnd,
		Reset:            fj.Reset, ResetAfterBytes: fj.ResetAfterBytes, SlowBodyChunk: fj.SlowBodyChunk,
	}
	if f.ResetAfterBytes < 0 || f.SlowBodyChunk < 0 {
		return Fault{}, errors.New("resetAfterBytes and slowBodyChunk must not be negative")
	}
	for _, d := range []struct {
		name string
		text string
		into *time.Duration
	}{{"latency", fj.Latency, &f.Latency}, {"exitCodeDelay", fj.ExitCodeDelay, &f.ExitCodeDelay}, {"slowBody", fj.SlowBody, &f.SlowBody}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil || v < 0 {
			return Fault{}, fmt.Errorf("%s must be a non-negative Go duration, e.g. \"250ms\"", d.name)
		}
		*d.into = v
	}
	if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
		return Fault{}, errors.New("status must be an HTTP status code")
	}
	return f, nil
}
