//go:build !linux

package front

import "syscall"

// procInfo is what the system says of a process.
type procInfo struct {
	pid, ppid, pgid int
}

// processTree returns root alone: without /proc the front cannot list a
// process's descendants, so it reaches them through root's process group.
func processTree(root int) []procInfo {
	return []procInfo{{pid: root, pgid: root}}
}

// memory is unknown without /proc.
func memory(int) (rss, peak int64) { return 0, 0 }

// setPdeathsig does nothing: only Linux has a parent-death signal.
func setPdeathsig(*syscall.SysProcAttr) {}
