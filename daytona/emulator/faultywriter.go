package emulator

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// errReset is what the handler's writes return once a Reset fault cut the
// connection.
var errReset = errors.New("emulator: connection reset by fault")

// faultyWriter applies a Reset or SlowBody fault to a plain HTTP response:
// the handler writes as usual, and the client gets the body slowly, or cut
// by a TCP reset after ResetAfterBytes bytes.
type faultyWriter struct {
	http.ResponseWriter
	s *Server
	r *http.Request

	reset   bool
	left    int  // body bytes before the reset (when reset)
	cut     bool // the connection was reset
	started bool // the status line was written

	slow  time.Duration
	chunk int
}

func (s *Server) newFaultyWriter(w http.ResponseWriter, r *http.Request, f *Fault) *faultyWriter {
	fw := &faultyWriter{ResponseWriter: w, s: s, r: r, reset: f.Reset, left: max(f.ResetAfterBytes, 0), slow: f.SlowBody, chunk: f.SlowBodyChunk}
	if fw.chunk <= 0 {
		fw.chunk = 512
	}
	return fw
}

// Unwrap lets http.ResponseController reach the server's writer.
func (fw *faultyWriter) Unwrap() http.ResponseWriter { return fw.ResponseWriter }

func (fw *faultyWriter) WriteHeader(code int) {
	if fw.cut {
		return
	}
	if fw.reset && fw.left == 0 {
		fw.cutNow()
		return
	}
	fw.started = true
	fw.ResponseWriter.WriteHeader(code)
}

func (fw *faultyWriter) Write(p []byte) (int, error) {
	if fw.cut {
		return 0, errReset
	}
	if fw.reset && len(p) >= fw.left {
		if fw.left == 0 {
			fw.cutNow()
			return 0, errReset
		}
		fw.started = true
		n, err := fw.write(p[:fw.left])
		if err != nil {
			return n, err
		}
		fw.cutNow()
		return n, errReset
	}
	fw.started = true
	n, err := fw.write(p)
	if fw.reset {
		fw.left -= n
	}
	return n, err
}

// write sends p, in slow pieces when the fault asks for them.
func (fw *faultyWriter) write(p []byte) (int, error) {
	if fw.slow <= 0 {
		return fw.ResponseWriter.Write(p)
	}
	written := 0
	for len(p) > 0 {
		piece := p[:min(len(p), fw.chunk)]
		n, err := fw.ResponseWriter.Write(piece)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
		_ = http.NewResponseController(fw.ResponseWriter).Flush()
		if len(p) == 0 {
			break
		}
		t := time.NewTimer(fw.slow)
		select {
		case <-t.C:
		case <-fw.r.Context().Done():
			t.Stop()
			return written, fw.r.Context().Err()
		case <-fw.s.ctx.Done():
			t.Stop()
			return written, ErrClosed
		}
	}
	return written, nil
}

func (fw *faultyWriter) Flush() {
	if !fw.cut {
		_ = http.NewResponseController(fw.ResponseWriter).Flush()
	}
}

// cutNow sends what was written so far and resets the connection.
func (fw *faultyWriter) cutNow() {
	fw.cut = true
	rc := http.NewResponseController(fw.ResponseWriter)
	if fw.started {
		// What the budget allowed reaches the client first.
		_ = rc.Flush()
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		fw.s.log.Warn().Err(err).Str("path", fw.r.URL.Path).Msg("cannot hijack the connection to reset it")
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST, not FIN
	}
	_ = conn.Close()
}
