package main

import "syscall"

// childAttr makes a child process die with the demo (SIGKILL when the
// demo's thread exits), so nothing is left behind even if the demo itself
// is killed.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
