//go:build linux

package sync

import "syscall"

// statTimes returns a stat's modification and change times (their field
// names differ between Linux and Darwin).
func statTimes(st *syscall.Stat_t) (mtime, ctime syscall.Timespec) { return st.Mtim, st.Ctim }
