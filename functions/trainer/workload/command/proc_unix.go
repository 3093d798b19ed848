//go:build unix

package command

import (
	"os"
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

// stoppedCleanly reports whether a command that got SIGTERM ended as one
// that saved its work does: exit status 0, exit status 143 (128 + SIGTERM,
// which a shell reports for a child that SIGTERM ended), or death by the
// SIGTERM itself.
func stoppedCleanly(ps *os.ProcessState) bool {
	if ps == nil {
		return false
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal() == syscall.SIGTERM
	}
	return ps.ExitCode() == 0 || ps.ExitCode() == 128+int(syscall.SIGTERM)
}

// describeExit says how the command ended, for messages: "exited (exit
// status 0)" or "was ended by signal: terminated".
func describeExit(ps *os.ProcessState) string {
	if ps == nil {
		return "did not report how it ended"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was ended by " + ps.String()
	}
	return "exited (" + ps.String() + ")"
}
