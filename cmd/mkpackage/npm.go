package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/paperclipai/daytona-worker/worker"
)

// PackageName is the npm name of the plugin. The host passes DAYTONA_API_KEY
// to a worker only under this name (protocol.md §1.1), so it must not change.
const PackageName = "@tickernelz/paperclip-pro-plugin-daytona"

// Where the main package keeps its two modules (package.json's
// paperclipPlugin), and where a platform package keeps the binary.
const (
	manifestModule = "dist/manifest.js"
	binaryPath     = "bin/daytona-worker"
)

//go:embed worker.js.tmpl
var workerTemplate string

// Options say what to build.
type Options struct {
	Version   string     // npm semver of every package, stamped into the binaries
	Out       string     // dist/npm: one folder per package, emptied first
	Platforms []Platform // binaries to build; the main package lists all of them
	Module    string     // Go package of the worker binary (an import path works from any folder of the module)
	Log       func(format string, args ...any)
}

// PlatformPackageName is the npm name of a platform's binary package.
func PlatformPackageName(p Platform) string { return PackageName + "-" + p.Name() }

// dirName is a package's folder under Out: its name without the scope.
func dirName(pkg string) string { return pkg[strings.IndexByte(pkg, '/')+1:] }

// Build writes the main package and one package per selected platform into
// opts.Out, building each binary with the Go toolchain.
func Build(opts Options) error {
	if !isSemver(opts.Version) {
		return fmt.Errorf("version %q is not semver (npm and the host's manifest check both need one)", opts.Version)
	}
	if err := os.RemoveAll(opts.Out); err != nil {
		return err
	}
	for _, p := range opts.Platforms {
		if err := buildPlatformPackage(opts, p); err != nil {
			return fmt.Errorf("%s: %w", PlatformPackageName(p), err)
		}
	}
	if err := writeMainPackage(opts); err != nil {
		return fmt.Errorf("%s: %w", PackageName, err)
	}
	return nil
}

func buildPlatformPackage(opts Options, p Platform) error {
	dir := filepath.Join(opts.Out, dirName(PlatformPackageName(p)))
	bin := filepath.Join(dir, filepath.FromSlash(binaryPath))
	if opts.Log != nil {
		opts.Log("building %s/%s → %s", p.GOOS, p.GOARCH, bin)
	}
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+opts.Version,
		"-o", bin, opts.Module)
	cmd.Env = append(os.Environ(), "GOOS="+p.GOOS, "GOARCH="+p.GOARCH, "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w", p.GOOS, p.GOARCH, err)
	}
	// npm keeps the executable bit it finds; make it independent of umask.
	if err := os.Chmod(bin, 0o755); err != nil {
		return err
	}
	if err := checkBinary(bin, p); err != nil {
		return err
	}
	manifest := map[string]any{
		"name":            PlatformPackageName(p),
		"version":         opts.Version,
		"description":     fmt.Sprintf("The daytona-worker binary for %s, installed by %s.", p.Name(), PackageName),
		"os":              []string{p.NodeOS},
		"cpu":             []string{p.NodeCPU},
		"files":           []string{binaryPath},
		"preferUnplugged": true,
	}
	if err := writeJSON(filepath.Join(dir, "package.json"), orderedPlatformKeys, manifest); err != nil {
		return err
	}
	readme := fmt.Sprintf("# %s\n\nThe `daytona-worker` binary for %s (Go %s/%s). It is installed as an optional\n"+
		"dependency of [`%s`](https://www.npmjs.com/package/%s), whose worker entry runs it;\n"+
		"install that package, not this one.\n", PlatformPackageName(p), p.Name(), p.GOOS, p.GOARCH, PackageName, PackageName)
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(readme), 0o644)
}

var orderedPlatformKeys = []string{"name", "version", "description", "os", "cpu", "files", "preferUnplugged"}

func writeMainPackage(opts Options) error {
	dir := filepath.Join(opts.Out, dirName(PackageName))
	manifest := worker.Manifest(opts.Version)
	workerModule := strings.TrimPrefix(manifest.Entrypoints.Worker, "./")

	optional := map[string]string{}
	platformPackages := map[string]string{}
	for _, p := range Platforms() {
		optional[PlatformPackageName(p)] = opts.Version
		platformPackages[p.Name()] = PlatformPackageName(p)
	}
	pkg := map[string]any{
		"name":        PackageName,
		"version":     opts.Version,
		"description": "Daytona sandbox provider for Paperclip, served by the native daytona-worker binary.",
		"type":        "module",
		"files":       []string{manifestModule, workerModule},
		"paperclipPlugin": map[string]string{
			"manifest": "./" + manifestModule,
			"worker":   manifest.Entrypoints.Worker,
		},
		// The entry script also runs the binary by hand, so an operator can
		// `npx --package … daytona-worker check` before installing.
		"bin":                  map[string]string{"daytona-worker": workerModule},
		"optionalDependencies": optional,
		"engines":              map[string]string{"node": ">=18"},
		"keywords":             []string{"paperclip", "plugin", "sandbox", "daytona"},
	}
	if err := writeJSON(filepath.Join(dir, "package.json"), orderedMainKeys, pkg); err != nil {
		return err
	}

	body, err := marshalIndent(manifest, "")
	if err != nil {
		return err
	}
	module := "// The plugin manifest. Generated by cmd/mkpackage from the worker's\n" +
		"// supportedMethods list (worker.Manifest); do not edit.\n" +
		"export default " + string(body) + ";\n"
	if err := writeFile(filepath.Join(dir, filepath.FromSlash(manifestModule)), []byte(module), 0o644); err != nil {
		return err
	}

	tmpl, err := template.New("worker.js").Funcs(template.FuncMap{
		"json": func(v any) (string, error) {
			b, err := marshalIndent(v, "")
			return string(b), err
		},
	}).Parse(workerTemplate)
	if err != nil {
		return err
	}
	var script bytes.Buffer
	if err := tmpl.Execute(&script, map[string]any{
		"Name": PackageName, "Version": opts.Version, "PlatformPackages": platformPackages,
	}); err != nil {
		return err
	}
	// Executable: it is also the package's bin.
	if err := writeFile(filepath.Join(dir, filepath.FromSlash(workerModule)), script.Bytes(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(mainReadme(opts.Version)), 0o644)
}

var orderedMainKeys = []string{"name", "version", "description", "type", "files", "paperclipPlugin", "bin",
	"optionalDependencies", "engines", "keywords"}

func mainReadme(version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", PackageName)
	b.WriteString("Paperclip's Daytona sandbox provider (plugin `" + worker.PluginID + "`, driver `" + worker.DriverKey + "`),\n")
	b.WriteString("served by `daytona-worker`, a native Go binary, instead of a Node worker. It keeps the\n")
	b.WriteString("plugin id, driver key and config schema of the Node plugin, so saved environments keep working.\n\n")
	b.WriteString("npm installs the binary for this machine from one of these optional dependencies:\n\n")
	for _, p := range Platforms() {
		fmt.Fprintf(&b, "- `%s@%s` (%s/%s)\n", PlatformPackageName(p), version, p.GOOS, p.GOARCH)
	}
	b.WriteString("\nCheck that a Daytona account works from this machine, before or after installing:\n\n")
	fmt.Fprintf(&b, "    DAYTONA_API_KEY=… npx --yes --package %s@%s daytona-worker check [--api-url URL]\n", PackageName, version)
	return b.String()
}

// writeJSON writes v (a map) as indented JSON with its keys in order, as
// package.json files are usually laid out.
func writeJSON(path string, order []string, v map[string]any) error {
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range order {
		val, ok := v[k]
		if !ok {
			return fmt.Errorf("writeJSON: no %q", k)
		}
		body, err := marshalIndent(val, "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  %q: %s", k, body)
		if i < len(order)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	if len(v) != len(order) {
		return fmt.Errorf("writeJSON: %d keys, %d ordered", len(v), len(order))
	}
	b.WriteString("}\n")
	return writeFile(path, b.Bytes(), 0o644)
}

// marshalIndent is json.MarshalIndent without HTML escaping ("<", ">", "&"
// stay as they are: these are files people read).
func marshalIndent(v any, prefix string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return err
	}
	return os.Chmod(path, mode) // whatever the umask
}

// semverPattern is npm's and the host manifest validator's notion of a
// version: MAJOR.MINOR.PATCH with an optional pre-release and build.
var semverPattern = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func isSemver(v string) bool { return semverPattern.MatchString(v) }

// describedPastTag matches what `git describe` appends to a tag for a commit
// after it or a modified tree.
var describedPastTag = regexp.MustCompile(`(-\d+-g[0-9a-f]+)?(-dirty)?$`)

// VersionFrom turns `git describe` output into an npm version: a release tag
// vX.Y.Z (or vX.Y.Z-rc.1) is that version; anything else (a bare commit,
// commits past a tag, a modified tree) is a development pre-release that
// sorts below every release.
func VersionFrom(describe string) string {
	d := strings.TrimSpace(describe)
	if v := strings.TrimPrefix(d, "v"); isSemver(v) && describedPastTag.FindString(v) == "" {
		return v
	}
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-':
			return r
		}
		return '-'
	}, d)
	if clean == "" {
		clean = "unknown"
	}
	return "0.0.0-dev.g" + clean
}
