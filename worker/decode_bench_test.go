package worker

import (
	"encoding/json"
	"testing"
)

// executeParams are environmentExecute's params as the host sends them, the
// size of those ExecuteOverhead sends.
const executeParams = `{"driverKey":"daytona","companyId":"c-1","environmentId":"env-1","issueId":"iss-1",` +
	`"config":{"apiKey":"dtn_0123456789abcdef","apiUrl":"http://127.0.0.1:40000/api","target":"us",` +
	`"snapshot":"daytona-small","reuseLease":true,"timeoutMs":300000},"lease":{"providerLeaseId":` +
	`"0f2c9f5e-9a41-4c47-8d43-1c3c2b7d9e11","metadata":{"remoteCwd":"/home/daytona/workspace"},` +
	`"expiresAt":null},"command":"true"}`

// BenchmarkDecodeExecute is the decoding of one execute's params, read as
// the plugin reads them.
func BenchmarkDecodeExecute(b *testing.B) {
	raw := json.RawMessage(executeParams)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, _, err := decodeExecute(raw); err != nil {
			b.Fatal(err)
		}
	}
}
