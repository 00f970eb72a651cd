package main

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// TestMain lets the test binary stand in for the scale program's children
// (measure runs os.Executable() -child STEP ...).
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChildPeakRSSIsItsOwn: a child that touches 32 MiB, started by a
// process that touched 256 MiB, measures as about 32 MiB — while the
// kernel's accounting of the same child (ru_maxrss) says at least 256 MiB,
// the parent's high-water mark that exec records for a child started with
// CLONE_VM, which every figure of make scale measured before.
func TestChildPeakRSSIsItsOwn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	parent := make([]byte, 256<<20)
	for i := 0; i < len(parent); i += 4096 {
		parent[i] = 1
	}
	m, err := measure(context.Background(), "touch", "32")
	if err != nil {
		t.Fatal(err)
	}
	if m.maxRSS < 32<<20 || m.maxRSS > 128<<20 {
		t.Errorf("child touching 32 MiB measured %d MiB; want 32 to 128 MiB", m.maxRSS>>20)
	}
	// The figure measure does not use, for contrast: it includes the parent.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := os.StartProcess(self, []string{self, "-child", "touch", "32"}, &os.ProcAttr{Files: []*os.File{nil, nil, nil}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok && ru.Maxrss*1024 < 256<<20 {
		t.Logf("ru_maxrss of the child %d MiB: this kernel does not count the parent's (the contrast does not hold here)", ru.Maxrss>>10)
	} else if ok {
		t.Logf("ru_maxrss of the same child: %d MiB (the parent's high-water mark); measured: %d MiB", ru.Maxrss>>10, m.maxRSS>>20)
	}
	runtime.KeepAlive(parent)
}
