//go:build unix && !linux

package command

import "syscall"

// setPdeathsig does nothing: only Linux can tie a process's life to its
// parent's.
func setPdeathsig(*syscall.SysProcAttr) {}
