// Package procstat reads a process's memory figures from Linux's /proc, for
// the benchmarks and the tests that bound the worker's memory.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory returns a process's peak and current resident memory (VmHWM and
// VmRSS) in MiB; an error when /proc cannot be read (no Linux, or no such
// process).
func Memory(pid int) (peak, rss float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmHWM:":
			peak = kb / 1024
		case "VmRSS:":
			rss = kb / 1024
		}
	}
	return peak, rss, nil
}
