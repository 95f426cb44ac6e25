package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/paperclipai/daytona-worker/internal/procstat"
)

// procMemory returns a process's peak and current resident memory in MiB.
var procMemory = procstat.Memory

// procCPU is the CPU time (user and system) a process's threads have used,
// from each thread's schedstat, in nanoseconds: the clock-tick counts of
// /proc/PID/stat are too coarse for a process that starts in milliseconds.
func procCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no schedstat for pid %d", pid)
	}
	var total int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := bytes.Fields(data)
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err == nil {
			total += ns
		}
	}
	return time.Duration(total), nil
}

// procFaults is the number of minor page faults a process has taken (each
// first touch of a page of its memory), from /proc/PID/stat.
func procFaults(pid int) (float64, error) {
	f, err := procstat.Stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(f[7], 64)
}

// machine describes where the numbers were taken.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return model
}

// loadAverage is the 1-, 5- and 15-minute load from /proc/loadavg.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// procWritten is how many bytes a process has written (wchar of
// /proc/PID/io: every write and send, its stdout's JSON most of all).
func procWritten(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar:"); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no wchar in /proc/%d/io", pid)
}
