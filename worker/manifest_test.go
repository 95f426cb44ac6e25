package worker

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker/config"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files from what the code produces")

// The manifest is kept as a golden file so a change to what the host is told
// shows up in review.
func TestManifestMatchesGolden(t *testing.T) {
	t.Parallel()
	got, err := json.MarshalIndent(Manifest("1.2.3"), "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", "manifest.golden.json")
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "run go test ./worker -run TestManifestMatchesGolden -update after an intended change")
}

func TestManifestKeepsTheNodePluginsIdentity(t *testing.T) {
	t.Parallel()
	m := Manifest("0.0.1")
	assert.Equal(t, "paperclip.daytona-sandbox-provider", m.ID)
	assert.Equal(t, 1, m.APIVersion)
	assert.Equal(t, "0.0.1", m.Version)
	assert.Equal(t, []string{"environment.drivers.register"}, m.Capabilities)
	assert.Equal(t, "./dist/worker.js", m.Entrypoints.Worker)
	require.Len(t, m.EnvironmentDrivers, 1)
	d := m.EnvironmentDrivers[0]
	assert.Equal(t, "daytona", d.DriverKey)
	assert.Equal(t, "sandbox_provider", d.Kind)
	assert.Equal(t, 300_000, d.DefaultAcquireTimeoutMs)
	key, ok := d.ConfigSchema.Property("apiKey")
	require.True(t, ok)
	assert.Equal(t, "string", key.Type)
	assert.Equal(t, "secret-ref", key.Format, "the host stores and resolves apiKey as a secret only when it is marked so")
	for _, p := range d.ConfigSchema.Properties {
		if p.Name != "apiKey" {
			assert.Empty(t, p.Format, "only apiKey is a secret: %s", p.Name)
		}
	}
}

// What the manifest declares is computed from the list initialize answers
// with, so the two agree by construction; this pins that nothing in Manifest
// overrides the derivation.
func TestManifestCapabilitiesComeFromSupportedMethods(t *testing.T) {
	t.Parallel()
	d := Manifest("1.0.0").EnvironmentDrivers[0]
	methods := protocol.SupportedMethods()
	assert.Equal(t, protocol.SandboxCapabilitiesFor(methods), d.SandboxCapabilities)
	f := protocol.DriverFeaturesFor(methods)
	assert.Equal(t, f.ReusableLeases, d.SupportsReusableLeases)
	assert.Equal(t, f.InteractiveSetup, d.SupportsInteractiveSetup)
	assert.Equal(t, f.TemplateCapture, d.SupportsTemplateCapture)
	assert.Equal(t, f.TemplateDelete, d.SupportsTemplateDelete)
	assert.Equal(t, f.LoginPty, d.SupportsLoginPty)
	assert.Equal(t, f.InteractiveSetup, len(d.InteractiveSetupConnectionTypes) > 0)
}

// The form's defaults are the values the worker falls back to, so an
// environment saved with the form behaves as one saved without those keys.
func TestConfigSchemaDefaultsAreTheWorkersDefaults(t *testing.T) {
	t.Parallel()
	schema := Manifest("1.0.0").EnvironmentDrivers[0].ConfigSchema
	parsed := config.Parse(config.Raw{})
	for name, want := range map[string]float64{
		"timeoutMs":           parsed.TimeoutMs,
		"livenessTimeoutMs":   parsed.LivenessTimeoutMs,
		"autoStopInterval":    parsed.AutoStopInterval,
		"autoArchiveInterval": parsed.AutoArchiveInterval,
		"autoDeleteInterval":  parsed.AutoDeleteInterval,
	} {
		p, ok := schema.Property(name)
		require.True(t, ok, name)
		assert.EqualValues(t, want, p.Default, name)
	}
	p, ok := schema.Property("reuseLease")
	require.True(t, ok)
	assert.Equal(t, parsed.ReuseLease, p.Default)
}
