package main

import (
	"debug/elf"
	"debug/macho"
	"fmt"
	"runtime"
	"strings"
)

// Platform is one npm platform package: Node's process.platform and
// process.arch (what npm's os/cpu fields and the entry script match on) and
// Go's GOOS/GOARCH for the same machine.
type Platform struct {
	NodeOS, NodeCPU string
	GOOS, GOARCH    string
}

// Name is the "<os>-<cpu>" suffix of the platform package, as Node spells it.
func (p Platform) Name() string { return p.NodeOS + "-" + p.NodeCPU }

// Platforms are the machines a Paperclip host runs on that we ship binaries
// for, in the order they appear in optionalDependencies.
func Platforms() []Platform {
	return []Platform{
		{NodeOS: "linux", NodeCPU: "x64", GOOS: "linux", GOARCH: "amd64"},
		{NodeOS: "linux", NodeCPU: "arm64", GOOS: "linux", GOARCH: "arm64"},
		{NodeOS: "darwin", NodeCPU: "arm64", GOOS: "darwin", GOARCH: "arm64"},
		{NodeOS: "darwin", NodeCPU: "x64", GOOS: "darwin", GOARCH: "amd64"},
	}
}

// SelectPlatforms parses a comma- or space-separated list of platform names;
// "all" (or empty) is every platform, "host" the one this runs on.
func SelectPlatforms(spec string) ([]Platform, error) {
	all := Platforms()
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "all" {
		return all, nil
	}
	var out []Platform
	for _, name := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' }) {
		found := false
		for _, p := range all {
			if name == p.Name() || (name == "host" && p.GOOS == runtime.GOOS && p.GOARCH == runtime.GOARCH) {
				out = append(out, p)
				found = true
				break
			}
		}
		if !found {
			if name == "host" {
				return nil, fmt.Errorf("no platform package for this machine (%s/%s)", runtime.GOOS, runtime.GOARCH)
			}
			names := make([]string, len(all))
			for i, p := range all {
				names[i] = p.Name()
			}
			return nil, fmt.Errorf("unknown platform %q (want host, all, or some of %s)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// checkBinary reads the executable's header and fails unless it is built for
// p: a wrong binary in a platform package would only show on the operator's
// machine, as an exec format error.
func checkBinary(path string, p Platform) error {
	var gotOS, gotArch string
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		gotOS = "linux"
		switch f.Machine {
		case elf.EM_X86_64:
			gotArch = "amd64"
		case elf.EM_AARCH64:
			gotArch = "arm64"
		default:
			gotArch = f.Machine.String()
		}
	} else if f, err := macho.Open(path); err == nil {
		defer f.Close()
		gotOS = "darwin"
		switch f.Cpu {
		case macho.CpuAmd64:
			gotArch = "amd64"
		case macho.CpuArm64:
			gotArch = "arm64"
		default:
			gotArch = f.Cpu.String()
		}
	} else {
		return fmt.Errorf("%s is neither an ELF nor a Mach-O executable", path)
	}
	if gotOS != p.GOOS || gotArch != p.GOARCH {
		return fmt.Errorf("%s is a %s/%s executable, not %s/%s", path, gotOS, gotArch, p.GOOS, p.GOARCH)
	}
	return nil
}
