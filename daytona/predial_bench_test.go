package daytona_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/paperclipai/daytona-worker/daytona"
	"github.com/paperclipai/daytona-worker/daytona/emulator"
)

// slowNetworkRTT stands in for the round trip to a remote Daytona.
const slowNetworkRTT = 10 * time.Millisecond

// slowConn delays every write by one round trip: a request costs a round
// trip before its answer can come.
type slowConn struct{ net.Conn }

func (c slowConn) Write(p []byte) (int, error) {
	time.Sleep(slowNetworkRTT)
	return c.Conn.Write(p)
}

// slowNetwork makes dials (a TCP handshake) and client writes each cost one
// round trip; TLS, which would add another round trip to each dial, is not
// modelled.
func slowNetwork(cfg *daytona.Config) {
	hc := daytona.NewHTTPClient()
	tr := hc.Transport.(*http.Transport)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(slowNetworkRTT)
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return slowConn{conn}, nil
	}
	cfg.HTTPClient = hc
}

// BenchmarkSessionCommandOverSlowNetwork runs a short session command
// (dispatch, follow its log stream, read its exit code) over a network with
// a slowNetworkRTT round trip, with the log stream's connection prepared
// during the dispatch and without.
func BenchmarkSessionCommandOverSlowNetwork(b *testing.B) {
	for _, prepare := range []bool{true, false} {
		b.Run(map[bool]string{true: "prepared", false: "dialed-after-dispatch"}[prepare], func(b *testing.B) {
			e := startEnv(b, emulator.Options{StepDelay: emulator.Synchronous}, slowNetwork)
			ctx := b.Context()
			_, tb := e.create(b, daytona.CreateParams{})
			if err := tb.CreateSession(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				var prepared *daytona.PreparedStream
				if prepare {
					prepared = tb.PrepareLogStream(ctx)
				}
				cmd, err := tb.SessionExec(ctx, "bench", daytona.SessionExecRequest{Command: "true", Async: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tb.FollowSessionCommandLogs(ctx, "bench", cmd.CmdID, daytona.FollowOptions{Prepared: prepared}); err != nil {
					b.Fatal(err)
				}
				got, err := tb.GetSessionCommand(ctx, "bench", cmd.CmdID)
				if err != nil || got.ExitCode == nil || *got.ExitCode != 0 {
					b.Fatalf("exit code: %+v, %v", got, err)
				}
				prepared.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/command")
			b.ReportMetric(0, "ns/op")
		})
	}
}
