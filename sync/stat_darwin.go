//go:build darwin

package sync

import "syscall"

// statTimes returns a stat's modification and change times (their field
// names differ between Linux and Darwin).
func statTimes(st *syscall.Stat_t) (mtime, ctime syscall.Timespec) { return st.Mtimespec, st.Ctimespec }
