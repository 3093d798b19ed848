package command

import "syscall"

// setPdeathsig has the kernel SIGKILL the command when the trainer dies, so
// that a killed trainer leaves no trial running. (Only the command itself
// gets the signal; the processes it starts are its own business.)
func setPdeathsig(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
