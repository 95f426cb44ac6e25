package protocol

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected values were produced by the SDK's decodeChannelBytes under
// Node ("null" = rejected).
func TestDecodeChannelBytesMatchesTheSDK(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"": "null", "YQ==": "61", "YQ": "null", "YQ=": "null", "YR==": "null", "aGVsbG8=": "68656c6c6f",
		"aGVsbG8": "null", "aGVs bG8=": "null", "aGVsbG8=\n": "null", "ab-_": "null", "ab+/": "69bfbf",
		"////": "ffffff", "AAAA": "000000", "=": "null", "====": "null", "YQ==YQ==": "null", "YWJj": "616263",
		"YWJjZA==": "61626364", "YWJjZA=": "null", "_w==": "null", "/w==": "ff", "4pyT": "e29c93",
	}
	for in, want := range cases {
		got, ok := DecodeChannelBytes(in)
		if want == "null" {
			assert.False(t, ok, "%q must be rejected", in)
			continue
		}
		require.True(t, ok, "%q must be accepted", in)
		assert.Equal(t, want, hex.EncodeToString(got), "%q", in)
		assert.Equal(t, in, EncodeChannelBytes(got))
	}
}

func FuzzChannelBytesRoundTrip(f *testing.F) {
	f.Add([]byte("hello"), "aGVsbG8=")
	f.Fuzz(func(t *testing.T, b []byte, s string) {
		if len(b) > 0 {
			got, ok := DecodeChannelBytes(EncodeChannelBytes(b))
			if !ok || string(got) != string(b) {
				t.Fatalf("round trip of %x failed", b)
			}
		}
		if got, ok := DecodeChannelBytes(s); ok && EncodeChannelBytes(got) != s {
			t.Fatalf("accepted %q, which does not re-encode to itself", s)
		}
	})
}

func TestSupportedMethodsIsDaytonasExactList(t *testing.T) {
	t.Parallel()
	want := `["health","shutdown","environmentValidateConfig","environmentProbe","environmentAcquireLease","environmentResumeLease","environmentReleaseLease","environmentStopLease","environmentDestroyLease","environmentRealizeWorkspace","environmentExecute","environmentRunnerIngressEndpoint","environmentSyncIn","environmentSyncOut","environmentStartInteractiveSetup","environmentGetInteractiveSetup","environmentCaptureTemplate","environmentCancelInteractiveSetup","environmentDeleteTemplate","loginPtyOpen","loginPtyInput","loginPtyStop","loginPtyClose","duplexChannelOpen","duplexChannelWrite","duplexChannelStop","duplexChannelClose"]`
	got, err := json.Marshal(SupportedMethods())
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
}

func TestToErrorKeepsCodesAndData(t *testing.T) {
	t.Parallel()
	assert.Equal(t, &Error{Code: CodeWorkerError, Message: "boom"}, ToError(errors.New("boom")))
	nf := MethodNotFound("x")
	assert.Same(t, nf, ToError(fmt.Errorf("wrapped: %w", nf)))
	assert.True(t, errors.Is(fmt.Errorf("w: %w", nf), &Error{Code: CodeMethodNotFound}))
	assert.Equal(t, "x is not implemented by this plugin", NotImplemented("x").Message)
	cleanup := &CreationCleanupError{Message: "m", Cleanup: CreationCleanup{ProviderLeaseID: "p", AttemptID: "a", Labels: map[string]string{"paperclip-provider": "daytona"}}}
	e := ToError(fmt.Errorf("ctx: %w", cleanup))
	assert.Equal(t, CodeWorkerError, e.Code)
	assert.Equal(t, "m", e.Message)
	assert.JSONEq(t, `{"schema":"paperclip/environment-creation-cleanup/v1","cleanup":{"providerLeaseId":"p","companyId":"","environmentId":"","attemptId":"a","accountFingerprint":"","labels":{"paperclip-provider":"daytona"}}}`, string(e.Data))
}

func TestUnknownMembersAreTolerated(t *testing.T) {
	t.Parallel()
	var p ExecuteParams
	require.NoError(t, json.Unmarshal([]byte(`{"driverKey":"daytona","companyId":"c","environmentId":"e","config":{"x":1},"lease":{"providerLeaseId":"p","metadata":{},"future":true},"command":"ls","newThing":{"a":[1]}}`), &p))
	assert.Equal(t, "ls", p.Command)
	assert.Equal(t, "p", *p.Lease.ProviderLeaseID)
}
