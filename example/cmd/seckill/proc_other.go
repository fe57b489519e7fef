//go:build !linux

package main

import "syscall"

// childAttr: no parent-death signal outside Linux; the demo stops its
// children itself at the end and on Ctrl-C.
func childAttr() *syscall.SysProcAttr { return nil }
