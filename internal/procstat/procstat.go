// Package procstat reads a process's figures (memory, the fields of its stat
// line) and the machine's CPU time from Linux's /proc, for the benchmarks and
// the tests that bound the worker's memory.
package procstat

import (
	"bytes"
	"errors"
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

// Stat returns the fields of /proc/PID/stat that follow the command name
// (which may hold spaces and parentheses): [0] is the state, [7] minflt,
// [11] utime and [12] stime (in clock ticks).
func Stat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	end := bytes.LastIndexByte(data, ')')
	if end < 0 || end+2 > len(data) {
		return nil, fmt.Errorf("/proc/%d/stat has no command name", pid)
	}
	f := strings.Fields(string(data[end+2:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f, nil
}

// CPUTimes is the machine's CPU time from /proc/stat, in clock ticks summed
// over its CPUs: Busy (anything but idle and iowait) of Total, and how many
// CPUs there are.
type CPUTimes struct{ Busy, Total, CPUs float64 }

// Machine reads the machine's CPU time.
func Machine() (CPUTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	var t CPUTimes
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) > 4 && fields[0] == "cpu":
			// user nice system idle iowait irq softirq steal (guest time
			// is counted in user already)
			for i, f := range fields[1:min(len(fields), 9)] {
				v, _ := strconv.ParseFloat(f, 64)
				t.Total += v
				if i != 3 && i != 4 {
					t.Busy += v
				}
			}
		case len(fields) > 0 && strings.HasPrefix(fields[0], "cpu"):
			t.CPUs++
		}
	}
	if t.CPUs == 0 {
		return CPUTimes{}, errors.New("no CPU lines in /proc/stat")
	}
	return t, nil
}

// BusySince is the average number of CPUs busy from t0 to t.
func (t CPUTimes) BusySince(t0 CPUTimes) float64 {
	if t.Total <= t0.Total {
		return 0
	}
	return (t.Busy - t0.Busy) / (t.Total - t0.Total) * t.CPUs
}
