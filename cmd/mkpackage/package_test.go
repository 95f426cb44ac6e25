package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paperclipai/daytona-worker/protocol"
	"github.com/paperclipai/daytona-worker/worker"
)

// files lists a folder's regular files with their permission bits.
func files(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = info.Mode()
		return nil
	}))
	return out
}

func readPackageJSON(t *testing.T, dir string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	var pkg map[string]any
	require.NoError(t, json.Unmarshal(raw, &pkg))
	return pkg
}

func TestBuildWritesExactlyThePackages(t *testing.T) {
	needBuilt(t)
	entries, err := os.ReadDir(built.dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"paperclip-pro-plugin-daytona", "paperclip-pro-plugin-daytona-" + built.host.Name()}, names)

	assert.Equal(t, map[string]fs.FileMode{
		"package.json": 0o644, "README.md": 0o644, "dist/manifest.js": 0o644, "dist/worker.js": 0o755,
	}, files(t, mainDir()))
	assert.Equal(t, map[string]fs.FileMode{
		"package.json": 0o644, "README.md": 0o644, "bin/daytona-worker": 0o755,
	}, files(t, platformDir()))
}

func TestMainPackageJSONIsAPaperclipPlugin(t *testing.T) {
	needBuilt(t)
	pkg := readPackageJSON(t, mainDir())
	assert.Equal(t, "@tickernelz/paperclip-pro-plugin-daytona", pkg["name"])
	assert.Equal(t, testVersion, pkg["version"])
	assert.Equal(t, "module", pkg["type"])
	assert.Equal(t, map[string]any{"manifest": "./dist/manifest.js", "worker": "./dist/worker.js"}, pkg["paperclipPlugin"])
	assert.Equal(t, []any{"dist/manifest.js", "dist/worker.js"}, pkg["files"])
	assert.Equal(t, map[string]any{"daytona-worker": "dist/worker.js"}, pkg["bin"])
	assert.Equal(t, map[string]any{
		"@tickernelz/paperclip-pro-plugin-daytona-linux-x64":    testVersion,
		"@tickernelz/paperclip-pro-plugin-daytona-linux-arm64":  testVersion,
		"@tickernelz/paperclip-pro-plugin-daytona-darwin-arm64": testVersion,
		"@tickernelz/paperclip-pro-plugin-daytona-darwin-x64":   testVersion,
	}, pkg["optionalDependencies"], "every platform, pinned to this exact version")
	assert.NotContains(t, pkg, "dependencies")
	assert.NotContains(t, pkg, "scripts", "the host installs with --ignore-scripts; nothing may depend on an install script")
}

func TestPlatformPackageJSONSelectsByOSAndCPU(t *testing.T) {
	needBuilt(t)
	pkg := readPackageJSON(t, platformDir())
	assert.Equal(t, PlatformPackageName(built.host), pkg["name"])
	assert.Equal(t, testVersion, pkg["version"])
	assert.Equal(t, []any{built.host.NodeOS}, pkg["os"])
	assert.Equal(t, []any{built.host.NodeCPU}, pkg["cpu"])
	assert.Equal(t, []any{"bin/daytona-worker"}, pkg["files"])
	assert.NotContains(t, pkg, "scripts")
}

func TestBinaryIsForItsPlatformAndStamped(t *testing.T) {
	needBuilt(t)
	bin := filepath.Join(platformDir(), "bin", "daytona-worker")
	require.NoError(t, checkBinary(bin, built.host))
	for _, other := range Platforms() {
		if other != built.host {
			assert.Error(t, checkBinary(bin, other), "a %s binary must not pass as %s", built.host.Name(), other.Name())
		}
	}
	out, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "daytona-worker "+testVersion+"\n", string(out))
	// -trimpath: no path of this machine is in the binary.
	raw, err := os.ReadFile(bin)
	require.NoError(t, err)
	wd, _ := os.Getwd()
	assert.NotContains(t, string(raw), filepath.Dir(filepath.Dir(wd)), "the module's folder leaked into the binary")
}

func TestCheckBinaryRejectsWhatIsNoExecutable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755))
	assert.ErrorContains(t, checkBinary(path, Platforms()[0]), "neither an ELF nor a Mach-O")
}

// The manifest module, loaded by Node as the host loads it, is exactly the
// worker's manifest for this version.
func TestManifestModuleIsTheWorkersManifest(t *testing.T) {
	needBuilt(t)
	node := needNode(t)
	module := filepath.Join(mainDir(), "dist", "manifest.js")
	out, err := exec.Command(node, "--input-type=module", "-e",
		`const m = await import(process.argv[1]); process.stdout.write(JSON.stringify(m.default));`,
		"file://"+module).Output()
	require.NoError(t, err)
	want, err := json.Marshal(worker.Manifest(testVersion))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(out))

	var m struct {
		EnvironmentDrivers []struct{ SandboxCapabilities protocol.SandboxCapabilities }
	}
	require.NoError(t, json.Unmarshal(out, &m))
	assert.Equal(t, protocol.SandboxCapabilitiesFor(protocol.SupportedMethods()), m.EnvironmentDrivers[0].SandboxCapabilities)
}

// npm pack of each folder holds exactly the intended files, with the
// binary executable: what an operator's npm install unpacks.
func TestNpmPackContents(t *testing.T) {
	needBuilt(t)
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found")
	}
	dest := t.TempDir()
	want := map[string]map[string]int64{
		PackageName: {"package/package.json": 0o644, "package/README.md": 0o644,
			"package/dist/manifest.js": 0o644, "package/dist/worker.js": 0o755},
		PlatformPackageName(built.host): {"package/package.json": 0o644, "package/README.md": 0o644,
			"package/bin/daytona-worker": 0o755},
	}
	for name, wantFiles := range want {
		cmd := exec.Command(npm, "pack", "--silent", "--pack-destination", dest, filepath.Join(built.dir, dirName(name)))
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
		out, err := cmd.Output()
		require.NoError(t, err, "npm pack %s", name)
		tarball := filepath.Join(dest, strings.TrimSpace(string(out)))
		got := tarFiles(t, tarball)
		assert.Equal(t, wantFiles, got, name)
	}
}

// tarFiles lists a gzipped tarball's regular files and their modes.
func tarFiles(t *testing.T, path string) map[string]int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	out := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			out[h.Name] = h.Mode & 0o777
		}
	}
}

func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	return node
}

func TestVersionFrom(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"v1.2.3":                  "1.2.3",
		"1.2.3":                   "1.2.3",
		"v1.2.3-rc.1":             "1.2.3-rc.1",
		"v1.2.3-4-gdeadbee":       "0.0.0-dev.gv1-2-3-4-gdeadbee",
		"v1.2.3-dirty":            "0.0.0-dev.gv1-2-3-dirty",
		"fd5db3b":                 "0.0.0-dev.gfd5db3b",
		"fd5db3b-dirty":           "0.0.0-dev.gfd5db3b-dirty",
		"":                        "0.0.0-dev.gunknown",
		"feature/x+y":             "0.0.0-dev.gfeature-x-y",
		"0123456":                 "0.0.0-dev.g0123456",
		"v1.2.3-4-gdeadbee-dirty": "0.0.0-dev.gv1-2-3-4-gdeadbee-dirty",
	} {
		got := VersionFrom(in)
		assert.Equal(t, want, got, "%q", in)
		assert.True(t, isSemver(got), "%q → %q is not semver", in, got)
	}
}

func TestSelectPlatforms(t *testing.T) {
	t.Parallel()
	all, err := SelectPlatforms("all")
	require.NoError(t, err)
	assert.Equal(t, Platforms(), all)
	two, err := SelectPlatforms("darwin-arm64, linux-x64")
	require.NoError(t, err)
	assert.Equal(t, []string{"darwin-arm64", "linux-x64"}, []string{two[0].Name(), two[1].Name()})
	_, err = SelectPlatforms("windows-x64")
	assert.ErrorContains(t, err, "unknown platform")
	host, err := SelectPlatforms("host")
	if err == nil {
		assert.Equal(t, runtime.GOOS, host[0].GOOS)
		assert.Equal(t, runtime.GOARCH, host[0].GOARCH)
	}
	var names []string
	for _, p := range Platforms() {
		names = append(names, p.Name())
	}
	assert.True(t, slices.Equal([]string{"linux-x64", "linux-arm64", "darwin-arm64", "darwin-x64"}, names))
}

func TestBuildRefusesANonSemverVersion(t *testing.T) {
	t.Parallel()
	err := Build(Options{Version: "fd5db3b", Out: t.TempDir()})
	assert.ErrorContains(t, err, "not semver")
}
