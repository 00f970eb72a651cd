//go:build linux

package fsfault

import (
	"fmt"
	"syscall"
)

func mount(dir string, size int64) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size))
}

func remount(dir string, readOnly bool) error {
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_NOSUID | syscall.MS_NODEV)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	return syscall.Mount("tmpfs", dir, "tmpfs", flags, "")
}

func unmount(dir string) error { return syscall.Unmount(dir, 0) }
