package emulator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

const (
	subprotoExitControl = "X-Daytona-Pty-Exit-Control"
	subprotoEnvsPrefix  = "X-Daytona-Pty-Envs~"
	subprotoSDKPrefix   = "X-Daytona-SDK-Version~"
	wsWriteTimeout      = 10 * time.Second // the daemon's writeWait
)

// errDropped reports that a fault cut the connection on purpose.
var errDropped = errors.New("emulator: websocket dropped by fault")

// offeredSubprotocols lists the client's Sec-WebSocket-Protocol tokens.
func offeredSubprotocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// acceptWS upgrades the request. Like the daemon it echoes a subprotocol the
// client offered (the PTY exit-control capability, else the browser SDK
// version token): Node's ws client rejects a handshake that picks none.
func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request) (*websocket.Conn, *batchConn, error) {
	var choose []string
	offered := offeredSubprotocols(r)
	for _, p := range offered {
		if p == subprotoExitControl {
			choose = append(choose, p)
		}
	}
	for _, p := range offered {
		if strings.HasPrefix(p, subprotoSDKPrefix) {
			choose = append(choose, p)
		}
	}
	if len(choose) == 0 && len(offered) > 0 {
		choose = append(choose, offered[len(offered)-1])
	}
	hw := &batchingHijacker{ResponseWriter: w}
	conn, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		Subprotocols:       choose,
		InsecureSkipVerify: true, // a local emulator: any origin
	})
	if err != nil {
		s.log.Debug().Err(err).Str("path", r.URL.Path).Msg("websocket accept")
		return nil, nil, err
	}
	return conn, hw.conn, nil
}

// batchingHijacker hands the WebSocket library a connection that can batch
// writes (batchConn) instead of the raw TCP connection.
type batchingHijacker struct {
	http.ResponseWriter
	conn *batchConn
}

func (h *batchingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("emulator: response writer cannot be hijacked")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	// net/http has already flushed the 101 response; anything left would
	// otherwise be lost with the writer replaced below.
	if err := brw.Writer.Flush(); err != nil {
		_ = nc.Close()
		return nil, nil, fmt.Errorf("emulator: flush handshake: %w", err)
	}
	h.conn = &batchConn{Conn: nc}
	return h.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(h.conn, brw.Writer.Size())), nil
}

// batchConn is a hijacked WebSocket connection whose writes, between
// startBatch and endBatch, collect in memory and reach the kernel in one
// system call. The frames on the wire are unchanged (the daemon's 1 KiB log
// messages stay 1 KiB messages); only how many go out per write differs, as
// it does behind the daemon's proxy. Without it a loopback follower costs a
// syscall and a client wake-up per kilobyte, and on a small shared machine
// the emulator, not the client under test, sets the pace.
type batchConn struct {
	net.Conn
	mu       sync.Mutex
	batching bool
	pending  []byte
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.batching {
		c.pending = append(c.pending, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *batchConn) startBatch() {
	c.mu.Lock()
	c.batching = true
	c.mu.Unlock()
}

// endBatch writes what the batch collected, within the daemon's write wait.
func (c *batchConn) endBatch() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batching = false
	if len(c.pending) == 0 {
		return nil
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	_, err := c.Conn.Write(c.pending)
	_ = c.Conn.SetWriteDeadline(time.Time{})
	c.pending = c.pending[:0]
	return err
}

// wsWriter serialises writes to one connection and applies a
// DropWebSocketAfterBytes fault: after that many payload bytes it writes the
// remainder of the budget and cuts the TCP connection without a close frame.
type wsWriter struct {
	conn  *websocket.Conn
	batch *batchConn
	mu    sync.Mutex
	left  int // payload bytes before the drop; <0 = no fault
}

func (s *Server) newWSWriter(r *http.Request, conn *websocket.Conn, batch *batchConn) *wsWriter {
	left := -1
	if f := appliedFault(r); f != nil && f.DropWebSocketAfterBytes > 0 {
		left = f.DropWebSocketAfterBytes
	}
	return &wsWriter{conn: conn, batch: batch, left: left}
}

func (ww *wsWriter) write(ctx context.Context, typ websocket.MessageType, p []byte) error {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	return ww.writeLocked(ctx, typ, p)
}

func (ww *wsWriter) writeLocked(ctx context.Context, typ websocket.MessageType, p []byte) error {
	if ww.left >= 0 && len(p) >= ww.left {
		if ww.left > 0 {
			_ = ww.conn.Write(ctx, typ, p[:ww.left])
		}
		ww.left = 0
		_ = ww.batch.endBatch() // what the budget allowed reaches the client
		_ = ww.conn.CloseNow()
		return errDropped
	}
	if ww.left > 0 {
		ww.left -= len(p)
	}
	return ww.conn.Write(ctx, typ, p)
}

// writeBatch writes each payload as its own message and hands them to the
// kernel together (see batchConn). The frames only fill memory until the
// end, so they need no deadline of their own: the batch's write has one.
func (ww *wsWriter) writeBatch(ctx context.Context, typ websocket.MessageType, payloads [][]byte) error {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	ww.batch.startBatch()
	for _, p := range payloads {
		if err := ww.writeLocked(context.Background(), typ, p); err != nil {
			_ = ww.batch.endBatch()
			return err
		}
	}
	return ww.batch.endBatch()
}
