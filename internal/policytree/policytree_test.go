package policytree

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/configpub/configpub/internal/safetext"
)

// tree builds a directory with a regular file, and entries the reader must
// refuse, next to an outside directory holding a marker.
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "repo"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "ok.yaml"), "a: 1\n")
	write(filepath.Join(root, "sub", "ok.yaml"), "b: 2\n")
	write(filepath.Join(outside, "secret.yaml"), "OUTSIDE-MARKER\n")
	for name, target := range map[string]string{
		"zero.yaml":     "/dev/zero",
		"escape.yaml":   filepath.Join(outside, "secret.yaml"),
		"relative.yaml": "ok.yaml",
		"linkdir":       outside,
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "pipe.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(root, "big.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: no disk, but Stat reports the size.
	if err := f.Truncate(DefaultMaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return root, outside
}

func TestDirRefusesLinksSpecialFilesAndOversize(t *testing.T) {
	root, _ := tree(t)
	d, err := Dir(root, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, fsys := range []fs.FS{d, New(os.DirFS(root), Limits{})} {
		if b, err := fs.ReadFile(fsys, "sub/ok.yaml"); err != nil || string(b) != "b: 2\n" {
			t.Fatalf("%T: regular file: %q, %v", fsys, b, err)
		}
		for _, c := range []struct {
			name string
			want error
		}{
			{"zero.yaml", ErrSymlink},
			{"escape.yaml", ErrSymlink},
			{"relative.yaml", ErrSymlink},
			{"linkdir/secret.yaml", ErrSymlink},
			{"pipe.yaml", ErrSpecial},
			{"big.yaml", ErrTooLarge},
			{"../outside/secret.yaml", fs.ErrInvalid},
		} {
			done := make(chan struct{})
			var b []byte
			var err error
			go func() { b, err = fs.ReadFile(fsys, c.name); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%T %s: read blocked", fsys, c.name)
			}
			if !errors.Is(err, c.want) || b != nil {
				t.Errorf("%T %s: got %q, %v; want %v", fsys, c.name, b, err, c.want)
				continue
			}
			if first := strings.SplitN(c.name, "/", 2)[0]; !strings.Contains(err.Error(), first) {
				t.Errorf("%T %s: error %q does not name the path", fsys, c.name, err)
			}
			if strings.Contains(err.Error(), "OUTSIDE-MARKER") {
				t.Errorf("%T %s: error echoes outside content", fsys, c.name)
			}
		}
	}
}

func TestWalkRefusesEveryLinkNotSkipped(t *testing.T) {
	root, _ := tree(t)
	for _, c := range []struct {
		remove []string
		want   string
	}{
		{nil, "big.yaml"}, // a regular file, refused when read
		{[]string{"big.yaml"}, "escape.yaml"},
		{[]string{"big.yaml", "escape.yaml"}, "linkdir"},
		{[]string{"big.yaml", "escape.yaml", "linkdir"}, "pipe.yaml"},
	} {
		for _, r := range c.remove {
			os.Remove(filepath.Join(root, r))
		}
		d, err := Dir(root, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var read []string
		err = Walk(d, nil, func(p string) error {
			_, err := d.ReadFile(p)
			read = append(read, p)
			return err
		})
		d.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("after removing %v: got %v (read %v), want a refusal naming %s", c.remove, err, read, c.want)
		}
	}
	// Skipped entries are neither read nor refused.
	d, _ := Dir(root, Limits{})
	defer d.Close()
	var read []string
	err := Walk(d, func(p string, _ fs.DirEntry) bool { return p != "ok.yaml" && p != "sub" && p != "sub/ok.yaml" }, func(p string) error {
		read = append(read, p)
		return nil
	})
	if err != nil || strings.Join(read, ",") != "ok.yaml,sub/ok.yaml" {
		t.Errorf("got %v, %v; want ok.yaml and sub/ok.yaml", read, err)
	}
}

func TestTotalLimit(t *testing.T) {
	fsys := fstest.MapFS{
		"a.yaml": {Data: []byte(strings.Repeat("a", 600))},
		"b.yaml": {Data: []byte(strings.Repeat("b", 600))},
		"l.yaml": {Data: []byte("a.yaml"), Mode: fs.ModeSymlink},
		"d.yaml": {Mode: fs.ModeDevice},
	}
	tr := New(fsys, Limits{MaxFileBytes: 1000, MaxTotalBytes: 1000})
	if _, err := tr.ReadFile("a.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.ReadFile("b.yaml"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("second file past the total: %v, want ErrTooLarge", err)
	}
	// A fresh budget over the same files.
	if _, err := New(tr, Limits{MaxFileBytes: 1000, MaxTotalBytes: 1000}).ReadFile("b.yaml"); err != nil {
		t.Errorf("fresh budget: %v", err)
	}
	if _, err := tr.ReadFile("l.yaml"); !errors.Is(err, ErrSymlink) {
		t.Errorf("MapFS symlink: %v", err)
	}
	if _, err := tr.ReadFile("d.yaml"); !errors.Is(err, ErrSpecial) {
		t.Errorf("MapFS device: %v", err)
	}
}

func TestReadFileSingle(t *testing.T) {
	root, _ := tree(t)
	if b, err := ReadFile(filepath.Join(root, "ok.yaml"), 0); err != nil || string(b) != "a: 1\n" {
		t.Fatalf("got %q, %v", b, err)
	}
	for name, want := range map[string]error{"zero.yaml": ErrSymlink, "pipe.yaml": ErrSpecial, "big.yaml": ErrTooLarge, "escape.yaml": ErrSymlink} {
		p := filepath.Join(root, name)
		if _, err := ReadFile(p, 0); !errors.Is(err, want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want %v naming %s", name, err, want, p)
		}
	}
}

func TestWriteFileRefusesLinksAndEscapes(t *testing.T) {
	root, outside := tree(t)
	if err := os.Symlink(outside, filepath.Join(root, "releases")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "x.yaml"), filepath.Join(root, "sub", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]error{
		"releases/dev.yaml":   ErrSymlink,
		"linkdir/dev.yaml":    ErrSymlink,
		"sub/link.yaml":       ErrSymlink,
		"pipe.yaml":           ErrSpecial,
		"../outside/dev.yaml": ErrOutside,
		"/etc/x":              ErrOutside,
		"ok.yaml/dev.yaml":    nil, // not a directory
		"sub":                 nil, // is a directory
	} {
		err := WriteFile(root, rel, []byte("x"), 0o644)
		if err == nil || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: %v, want a refusal (%v)", rel, err, want)
		}
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside directory changed: %v", entries)
	}
	if err := WriteFile(root, "releases2/dev.yaml", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, "releases2"))
	if err != nil || fi.Mode().Perm() != 0o755&^umask() {
		t.Errorf("created directory mode %v, %v", fi.Mode(), err)
	}
}

func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}

// TestNamesWithControlCharactersAreRefused: a file or directory whose name
// holds a newline (which would start a forged log line or CI annotation),
// an escape, DEL, a C1 control, a line separator, a bidirectional override
// or a byte that is not UTF-8 is refused when walked or opened, naming the
// path escaped on one line, in a working tree and in any other tree; a
// hidden one is skipped as hidden entries are.
func TestNamesWithControlCharactersAreRefused(t *testing.T) {
	for _, c := range []struct{ name, shown string }{
		{"agents/x\n::error title=PWN::configpub check passed.yaml", `agents/x\n::error title=PWN::configpub check passed.yaml`},
		{"agents/esc\x1b[2J.yaml", `agents/esc\x1b[2J.yaml`},
		{"agents/del\x7f.yaml", `agents/del\x7f.yaml`},
		{"agents/c1\u0085.yaml", `agents/c1\u0085.yaml`},
		{"agents/sep\u2028.yaml", `agents/sep\u2028.yaml`},
		{"agents/lmth.\u202eyaml", `agents/lmth.\u202eyaml`},
		{"agents/bad\xff.yaml", `agents/bad\xff.yaml`},
		{"dir\n/a.yaml", `dir\n`},
	} {
		root := t.TempDir()
		p := filepath.Join(root, filepath.FromSlash(c.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("a: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, ".hidden\n.yaml"), []byte("a: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := Dir(root, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		mapFS := fstest.MapFS{c.name: {Data: []byte("a: 1\n")}, "ok.yaml": {Data: []byte("a: 1\n")}}
		for _, fsys := range []fs.FS{d, New(mapFS, Limits{})} {
			err := Walk(fsys, func(p string, _ fs.DirEntry) bool { return strings.HasPrefix(p, ".") }, func(string) error { return nil })
			if !errors.Is(err, ErrControlName) || !strings.Contains(err.Error(), c.shown) || safetext.HasControl(err.Error()) {
				t.Errorf("%T: Walk with %q: got %q, want ErrControlName naming %s on one line", fsys, c.name, err, c.shown)
			}
			if _, err := fs.ReadFile(fsys, c.name); !errors.Is(err, ErrControlName) {
				t.Errorf("%T: ReadFile %q: got %v, want ErrControlName", fsys, c.name, err)
			}
		}
		d.Close()
	}
}

type gitlinkSys string

func (g gitlinkSys) Gitlink() string { return string(g) }

// TestSubmodulesAreRefused: a directory other than the root holding a .git
// file or directory (a submodule, a nested repository) is refused as a
// submodule when walked, and so is a gitlink entry; the root's .git is not.
func TestSubmodulesAreRefused(t *testing.T) {
	for _, dotgit := range []string{"file", "dir"} {
		root := t.TempDir()
		for _, d := range []string{".git", "a", "sub/agents"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if dotgit == "file" {
			if err := os.WriteFile(filepath.Join(root, "sub", ".git"), []byte("gitdir: ../.git/modules/sub\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Mkdir(filepath.Join(root, "sub", ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "sub", "agents", "x.yaml"), []byte("a: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := Dir(root, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var read []string
		err = Walk(d, func(p string, _ fs.DirEntry) bool { return strings.HasPrefix(path.Base(p), ".") }, func(p string) error {
			read = append(read, p)
			return nil
		})
		d.Close()
		if !errors.Is(err, ErrSubmodule) || !strings.Contains(err.Error(), "read sub: submodule") || len(read) != 0 {
			t.Errorf(".git %s: got %v (read %v), want sub refused as a submodule", dotgit, err, read)
		}
	}
	fi, err := fs.Stat(fstest.MapFS{"x": {}}, "x")
	if err != nil {
		t.Fatal(err)
	}
	tree := New(irregularFS{fstest.MapFS{"ok.yaml": {Data: []byte("a: 1\n")}, "vendored": {Mode: fs.ModeIrregular}}, fi}, Limits{})
	if err := Walk(tree, nil, func(string) error { return nil }); !errors.Is(err, ErrSubmodule) {
		t.Errorf("a gitlink, walked: got %v, want ErrSubmodule", err)
	}
	if _, err := fs.ReadFile(tree, "vendored"); !errors.Is(err, ErrSubmodule) {
		t.Errorf("a gitlink, read: got %v, want ErrSubmodule", err)
	}
}

// irregularFS describes its irregular entries as gitlinks, as gitfs's
// Git-tree reader does.
type irregularFS struct {
	fstest.MapFS
	link fs.FileInfo
}

func (f irregularFS) Stat(name string) (fs.FileInfo, error) {
	fi, err := f.MapFS.Stat(name)
	if err == nil && fi.Mode()&fs.ModeIrregular != 0 {
		return linkInfo{f.link, fi.Name()}, nil
	}
	return fi, err
}

func (f irregularFS) Lstat(name string) (fs.FileInfo, error) { return f.Stat(name) }

func (f irregularFS) ReadDir(name string) ([]fs.DirEntry, error) {
	es, err := f.MapFS.ReadDir(name)
	for i, e := range es {
		if e.Type()&fs.ModeIrregular != 0 {
			es[i] = fs.FileInfoToDirEntry(linkInfo{f.link, e.Name()})
		}
	}
	return es, err
}

type linkInfo struct {
	fs.FileInfo
	name string
}

func (l linkInfo) Name() string      { return l.name }
func (l linkInfo) Mode() fs.FileMode { return fs.ModeIrregular }
func (l linkInfo) Sys() any          { return gitlinkSys("0123") }
