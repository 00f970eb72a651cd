//go:build !linux

package fsfault

import "errors"

var errUnsupported = errors.New("mounting a tmpfs is only done on Linux")

func mount(string, int64) error  { return errUnsupported }
func remount(string, bool) error { return errUnsupported }
func unmount(string) error       { return errUnsupported }
