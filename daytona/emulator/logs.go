package emulator

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/coder/websocket"
)

// handleCommandLogs serves a command's log: a WebSocket stream with
// ?follow=true and an Upgrade, a chunked HTTP stream with ?follow=true alone
// (what the runner does), else a snapshot (JSON for SDK ≥ 0.167.0, text
// otherwise).
func (s *Server) handleCommandLogs(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	se, c := s.commandFor(w, r, sb)
	if c == nil {
		return
	}
	mode := requestOutputMode(r)
	if r.URL.Query().Get("follow") == "true" {
		if isWebSocket(r) {
			s.followLogsWS(w, r, se, c, mode)
		} else {
			s.followLogsHTTP(w, r, se, c)
		}
		return
	}
	raw, err := os.ReadFile(c.logPath)
	if err != nil {
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to read logs: "+err.Error())
		return
	}
	switch mode {
	case outputSplit:
		stdout, stderr := demux(raw)
		writeJSON(w, http.StatusOK, map[string]string{"output": string(raw), "stdout": string(stdout), "stderr": string(stderr)})
	case outputRaw:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(raw)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(stripMarkers(raw))
	}
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// logFollower reads a command's log from the start and knows when it is over.
type logFollower struct {
	s   *Server
	se  *session
	c   *sessCmd
	f   *os.File
	buf []byte // one read's worth
}

// next reads what is available. over reports that nothing more will come:
// the command had ended (exit code set, or output complete under an
// ExitCodeDelay fault) before this read, or the session is gone.
func (lf *logFollower) next() (chunk []byte, over bool, wait <-chan struct{}, err error) {
	wait = lf.c.waitChan()
	lf.s.mu.Lock()
	done := lf.c.exitCode != nil || lf.c.ended || lf.se.deleted
	lf.s.mu.Unlock()
	n, err := lf.f.Read(lf.buf)
	if n > 0 {
		return lf.buf[:n], false, wait, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, nil, err
	}
	return nil, done, wait, nil
}

// followLogsWS streams the log as binary frames from the start (history is
// replayed), cut at arbitrary offsets, and closes 1000 once the command has an
// exit code and everything was sent, or the session is deleted.
func (s *Server) followLogsWS(w http.ResponseWriter, r *http.Request, se *session, c *sessCmd, mode outputMode) {
	release, ok := s.hold()
	if !ok {
		s.toolboxError(w, r, http.StatusServiceUnavailable, "emulator is shutting down")
		return
	}
	defer release()
	conn, batch, err := s.acceptWS(w, r)
	if err != nil {
		return
	}
	out := s.newWSWriter(r, conn, batch)
	ctx := conn.CloseRead(s.ctx)
	f, err := os.Open(c.logPath)
	if err != nil {
		_ = conn.Close(websocket.StatusInternalError, "failed to open log")
		return
	}
	defer f.Close()
	// Read what is there in large pieces; sendFrames cuts them into the
	// daemon's frame size.
	lf := &logFollower{s: s, se: se, c: c, f: f, buf: make([]byte, max(logReadSize, s.opts.logFrameSize()))}
	halfOpen := appliedFault(r) != nil && appliedFault(r).HalfOpenAfterEnd
	var strip markerStripper
	for {
		chunk, over, wait, err := lf.next()
		if err != nil {
			_ = conn.Close(websocket.StatusInternalError, "failed to read log")
			return
		}
		if len(chunk) > 0 {
			if mode == outputCombined {
				chunk = strip.strip(chunk)
			}
			if !s.sendFrames(ctx, out, chunk) {
				return
			}
			continue
		}
		if over {
			if rest := strip.flush(); len(rest) > 0 && !s.sendFrames(ctx, out, rest) {
				return
			}
			if halfOpen {
				// Silent from here on: no close frame until the client (or
				// Close) ends the connection.
				<-ctx.Done()
				_ = conn.CloseNow()
				return
			}
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-wait:
		case <-ctx.Done():
			if s.ctx.Err() != nil {
				_ = conn.CloseNow()
			}
			return
		}
	}
}

// logReadSize is how much of a log file one read takes.
const logReadSize = 64 << 10

// sendFrames writes chunk as binary frames of Options.LogFrameSize bytes (the
// last one shorter), each cut further per Options.LogFrameSplit, in one batch.
func (s *Server) sendFrames(ctx context.Context, out *wsWriter, chunk []byte) bool {
	size := s.opts.logFrameSize()
	frames := make([][]byte, 0, (len(chunk)+size-1)/size)
	for len(chunk) > 0 {
		n := min(size, len(chunk))
		if s.opts.LogFrameSplit == nil {
			frames = append(frames, chunk[:n])
		} else {
			for _, fr := range s.opts.LogFrameSplit(chunk[:n]) {
				if len(fr) > 0 {
					frames = append(frames, fr)
				}
			}
		}
		chunk = chunk[n:]
	}
	return out.writeBatch(ctx, websocket.MessageBinary, frames) == nil
}

// followLogsHTTP is the runner's chunked alternative: combined output,
// markers stripped, until the command ends.
func (s *Server) followLogsHTTP(w http.ResponseWriter, r *http.Request, se *session, c *sessCmd) {
	release, ok := s.hold()
	if !ok {
		return
	}
	defer release()
	f, err := os.Open(c.logPath)
	if err != nil {
		s.toolboxError(w, r, http.StatusInternalServerError, "failed to read logs: "+err.Error())
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	lf := &logFollower{s: s, se: se, c: c, f: f, buf: make([]byte, 32<<10)}
	halfOpen := appliedFault(r) != nil && appliedFault(r).HalfOpenAfterEnd
	var strip markerStripper
	for {
		chunk, over, wait, err := lf.next()
		if err != nil {
			return
		}
		if len(chunk) > 0 {
			if _, err := w.Write(strip.strip(chunk)); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			continue
		}
		if over {
			_, _ = w.Write(strip.flush())
			if halfOpen {
				if flusher != nil {
					flusher.Flush()
				}
				select {
				case <-r.Context().Done():
				case <-s.ctx.Done():
				}
			}
			return
		}
		select {
		case <-wait:
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// markerStripper removes markers from a byte stream whose chunks may cut a
// marker anywhere; it holds back up to two bytes that could start one.
type markerStripper struct {
	carry []byte
}

func (m *markerStripper) strip(chunk []byte) []byte {
	b := append(m.carry, chunk...)
	m.carry = nil
	b = stripMarkers(b)
	// Keep a trailing \x01, \x01\x01, \x02 or \x02\x02 for the next chunk.
	keep := 0
	for keep < 2 && keep < len(b) {
		c := b[len(b)-1-keep]
		if c != 1 && c != 2 {
			break
		}
		if keep == 1 && c != b[len(b)-1] {
			break
		}
		keep++
	}
	if keep > 0 {
		m.carry = append([]byte{}, b[len(b)-keep:]...)
		b = b[:len(b)-keep]
	}
	return b
}

func (m *markerStripper) flush() []byte {
	out := m.carry
	m.carry = nil
	return out
}
