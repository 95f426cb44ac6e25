// Command mkpackage builds the npm packages that install daytona-worker into
// Paperclip, the way esbuild and biome ship native binaries: a main package
// (the plugin: package.json with paperclipPlugin, dist/manifest.js generated
// from worker.Manifest, dist/worker.js that runs the binary) and one package
// per platform holding the binary, chosen by npm through optionalDependencies
// and their os/cpu fields. It is what `make package` runs.
//
//	mkpackage -version VERSION [-out dist/npm] [-platforms all|host|linux-x64,…]
//
// VERSION is an npm semver or `git describe` output (see VersionFrom). Every
// binary is built with -trimpath and the version stamped into main.version,
// and its header is checked against its package's os and cpu.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	version := flag.String("version", "", "package version: semver, or git describe output (required)")
	out := flag.String("out", "dist/npm", "output folder (emptied first)")
	platforms := flag.String("platforms", "all", "platforms to build binaries for: all, host, or a list such as linux-x64,darwin-arm64")
	module := flag.String("module", "github.com/paperclipai/daytona-worker/cmd/daytona-worker", "Go package of the worker binary")
	flag.Parse()
	if *version == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	selected, err := SelectPlatforms(*platforms)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkpackage:", err)
		os.Exit(2)
	}
	opts := Options{
		Version: VersionFrom(*version), Out: *out, Platforms: selected, Module: *module,
		Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "mkpackage: "+format+"\n", args...) },
	}
	if err := Build(opts); err != nil {
		fmt.Fprintln(os.Stderr, "mkpackage:", err)
		os.Exit(1)
	}
	if len(selected) < len(Platforms()) {
		fmt.Fprintf(os.Stderr, "mkpackage: built %d of %d platform packages (fine for testing; a release needs all of them)\n",
			len(selected), len(Platforms()))
	}
	fmt.Fprintf(os.Stderr, "mkpackage: %s@%s in %s\n", PackageName, opts.Version, *out)
}
