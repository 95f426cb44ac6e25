package emulator

import (
	"context"
	"errors"
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
func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
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
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       choose,
		InsecureSkipVerify: true, // a local emulator: any origin
	})
	if err != nil {
		s.log.Debug().Err(err).Str("path", r.URL.Path).Msg("websocket accept")
		return nil, err
	}
	return conn, nil
}

// wsWriter serialises writes to one connection and applies a
// DropWebSocketAfterBytes fault: after that many payload bytes it writes the
// remainder of the budget and cuts the TCP connection without a close frame.
type wsWriter struct {
	conn *websocket.Conn
	mu   sync.Mutex
	left int // payload bytes before the drop; <0 = no fault
}

func (s *Server) newWSWriter(r *http.Request, conn *websocket.Conn) *wsWriter {
	left := -1
	if n, ok := r.Context().Value(dropAfterKey{}).(int); ok && n > 0 {
		left = n
	}
	return &wsWriter{conn: conn, left: left}
}

func (ww *wsWriter) write(ctx context.Context, typ websocket.MessageType, p []byte) error {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, wsWriteTimeout)
	defer cancel()
	if ww.left >= 0 && len(p) >= ww.left {
		if ww.left > 0 {
			_ = ww.conn.Write(ctx, typ, p[:ww.left])
		}
		ww.left = 0
		_ = ww.conn.CloseNow()
		return errDropped
	}
	if ww.left > 0 {
		ww.left -= len(p)
	}
	return ww.conn.Write(ctx, typ, p)
}
