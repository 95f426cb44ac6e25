package rpc

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
)

// executeLine is an environmentExecute request as the host sends it, about
// the size of the one ExecuteOverhead sends.
const executeLine = `{"jsonrpc":"2.0","id":ID,"method":"environmentExecute","params":{"driverKey":"daytona",` +
	`"companyId":"c-1","environmentId":"env-1","issueId":"iss-1","config":{"apiKey":"dtn_0123456789abcdef",` +
	`"apiUrl":"http://127.0.0.1:40000/api","target":"us","snapshot":"daytona-small","reuseLease":true,` +
	`"timeoutMs":300000},"lease":{"providerLeaseId":"0f2c9f5e-9a41-4c47-8d43-1c3c2b7d9e11","metadata":` +
	`{"remoteCwd":"/home/daytona/workspace"},"expiresAt":null},"command":"true"},` +
	`"paperclipInvocation":{"id":"inv-ID","scope":{"companyId":"c-1"},"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`

// BenchmarkServeRequests is the transport's own work per request: reading
// and parsing the line, dispatching it and writing the reply (the handler
// returns at once).
func BenchmarkServeRequests(b *testing.B) {
	var in bytes.Buffer
	for i := 0; i < b.N; i++ {
		id := strconv.Itoa(i + 1)
		in.WriteString(string(bytes.ReplaceAll([]byte(executeLine), []byte("ID"), []byte(id))) + "\n")
	}
	b.SetBytes(int64(len(executeLine)))
	b.ReportAllocs()
	b.ResetTimer()
	c := New(&in, io.Discard, Options{Logger: zerolog.Nop()})
	err := c.Serve(context.Background(), HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		return nil, nil
	}))
	if err != io.EOF {
		b.Fatal(err)
	}
}
