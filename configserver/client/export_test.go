package client

// SetCrashBeforeRename makes the next last-known-good writes stop after the
// temporary file is written and fsynced but before the rename, as a crash
// there would: a fault that cannot be caused for real in a test.
func SetCrashBeforeRename(c *Client, f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults.beforeRename = f
}
