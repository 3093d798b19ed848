//go:build unix

package command

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the command in a process group of its own, so that
// signals reach the processes it starts, and on Linux asks the kernel to
// kill it if the trainer dies.
func sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(attr)
	return attr
}

// signalGroup sends sig to every process of the group pgid. A group that is
// already gone is not an error.
func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig) // the only failure that matters is ESRCH: nothing left to signal
}

// exitHint explains an exit that was not the command's own doing.
func exitHint(exit *exec.ExitError) string {
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return "; something outside hpsearch killed it, often the out-of-memory killer: give the trial more memory or make it use less"
	}
	return ""
}
