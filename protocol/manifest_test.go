package protocol

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func without(methods []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(methods), func(m string) bool { return slices.Contains(drop, m) })
}

func TestSandboxCapabilitiesFollowTheHostsPrerequisites(t *testing.T) {
	t.Parallel()
	all := SupportedMethods()
	everything := SandboxCapabilities{true, true, true, true, true, true, true, true, true}
	cases := []struct {
		name    string
		methods []string
		want    SandboxCapabilities
	}{
		{"the full list grants all nine", all, everything},
		{"nothing grants nothing", nil, SandboxCapabilities{}},
		{"reuse needs resume, release and destroy", without(all, MethodEnvironmentResumeLease),
			func() SandboxCapabilities { c := everything; c.ReusableLeases = false; return c }()},
		{"sync out alone goes, and concurrency with it", without(all, MethodEnvironmentSyncOut),
			func() SandboxCapabilities {
				c := everything
				c.NativeSyncOut, c.ConcurrentSyncOperations = false, false
				return c
			}()},
		{"execute carries three capabilities", without(all, MethodEnvironmentExecute),
			func() SandboxCapabilities {
				c := everything
				c.PersistentProcessSessions, c.IndependentControlCommands, c.IncrementalSessionOutput = false, false, false
				return c
			}()},
		{"duplex needs duplexChannelOpen", without(all, MethodDuplexChannelOpen),
			func() SandboxCapabilities { c := everything; c.DuplexCommandStream = false; return c }()},
		{"ingress needs its endpoint method", without(all, MethodEnvironmentRunnerIngressEndpoint),
			func() SandboxCapabilities { c := everything; c.RunnerWebSocketIngress = false; return c }()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, SandboxCapabilitiesFor(tc.methods))
		})
	}
}

func TestDriverFeaturesNeedEveryMethodOfTheirGroup(t *testing.T) {
	t.Parallel()
	all := SupportedMethods()
	assert.Equal(t, DriverFeatures{true, true, true, true, true}, DriverFeaturesFor(all))
	assert.Equal(t, DriverFeatures{}, DriverFeaturesFor(nil))
	assert.False(t, DriverFeaturesFor(without(all, MethodLoginPtyStop)).LoginPty)
	assert.False(t, DriverFeaturesFor(without(all, MethodEnvironmentCancelInteractiveSetup)).InteractiveSetup)
	assert.False(t, DriverFeaturesFor(without(all, MethodEnvironmentDestroyLease)).ReusableLeases)
	f := DriverFeaturesFor(without(all, MethodEnvironmentCaptureTemplate))
	assert.False(t, f.TemplateCapture)
	assert.True(t, f.TemplateDelete)
}

func TestCapabilitiesAreWrittenWithEveryKey(t *testing.T) {
	t.Parallel()
	got, err := json.Marshal(SandboxCapabilitiesFor([]string{MethodEnvironmentExecute}))
	require.NoError(t, err)
	assert.JSONEq(t, `{"reusableLeases":false,"nativeSyncIn":false,"nativeSyncOut":false,
		"persistentProcessSessions":true,"independentControlCommands":true,"incrementalSessionOutput":true,
		"concurrentSyncOperations":false,"duplexCommandStream":false,"runnerWebSocketIngress":false}`, string(got))
}

func TestObjectSchemaKeepsPropertyOrder(t *testing.T) {
	t.Parallel()
	one := 1.0
	s := ObjectSchema{Properties: []SchemaProperty{
		{Name: "zeta", Type: "string", Format: "secret-ref", Description: "first"},
		{Name: "alpha", Type: "integer", Minimum: &one, Enum: []any{1, 2}, Default: 2},
		{Name: "mid", Type: "boolean", Default: false},
	}}
	got, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"object","properties":{`+
		`"zeta":{"type":"string","format":"secret-ref","description":"first"},`+
		`"alpha":{"type":"integer","enum":[1,2],"minimum":1,"default":2},`+
		`"mid":{"type":"boolean","default":false}}}`, string(got))
	p, ok := s.Property("alpha")
	require.True(t, ok)
	assert.Equal(t, "integer", p.Type)
	_, ok = s.Property("nope")
	assert.False(t, ok)
}
