package imagebuild_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/configpub/configpub/internal/imagebuild"
)

// TestImageRunsServeAsNonRoot builds a two-platform image into an OCI
// layout directory, reads it back from disk and checks each image: its
// config runs `configpub serve` as a non-root user that the image's
// /etc/passwd defines, and the binary is in it, executable.
func TestImageRunsServeAsNonRoot(t *testing.T) {
	dir := t.TempDir()
	bins := map[string][]byte{}
	var plats []imagebuild.Platform
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, "configpub_linux_"+arch)
		bins[arch] = []byte("binary for " + arch)
		if err := os.WriteFile(p, bins[arch], 0o755); err != nil {
			t.Fatal(err)
		}
		plats = append(plats, imagebuild.Platform{OS: "linux", Arch: arch, Binary: p})
	}
	opts := imagebuild.Options{Platforms: plats, Version: "v1.2.3", Commit: "4f2c0d9e", Created: time.Unix(1764547200, 0)}
	idx, err := imagebuild.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image")
	if err := imagebuild.WriteLayout(out, idx); err != nil {
		t.Fatal(err)
	}

	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	read, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	// The layout's index.json is the image index: one image per platform.
	inner := read
	m, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 {
		t.Fatalf("index holds %d images, want 2", len(m.Manifests))
	}
	for _, d := range m.Manifests {
		img, err := inner.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		arch := d.Platform.Architecture
		if cf.OS != "linux" || cf.Architecture != arch {
			t.Errorf("config platform %s/%s, descriptor %s", cf.OS, cf.Architecture, arch)
		}
		if want := []string{"/usr/local/bin/configpub", "serve"}; !reflect.DeepEqual(cf.Config.Entrypoint, want) {
			t.Errorf("%s: entrypoint %v, want %v", arch, cf.Config.Entrypoint, want)
		}
		uidStr, _, _ := strings.Cut(cf.Config.User, ":")
		uid, err := strconv.Atoi(uidStr)
		if err != nil || uid == 0 {
			t.Fatalf("%s: user %q is not a numeric non-root uid", arch, cf.Config.User)
		}
		if cf.Config.Labels["org.opencontainers.image.revision"] != "4f2c0d9e" {
			t.Errorf("%s: revision label %q", arch, cf.Config.Labels["org.opencontainers.image.revision"])
		}
		files := flatten(t, img)
		if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:"+uidStr+":") {
			t.Errorf("%s: /etc/passwd does not define uid %s:\n%s", arch, uidStr, files["etc/passwd"].data)
		}
		b := files["usr/local/bin/configpub"]
		if !bytes.Equal(b.data, bins[arch]) || b.mode&0o111 == 0 {
			t.Errorf("%s: binary in the image: %q mode %o", arch, b.data, b.mode)
		}
		if h := files["home/nonroot"]; h.uid != uid {
			t.Errorf("%s: home owned by %d, want %d", arch, h.uid, uid)
		}
	}

	// Reproducible: the same inputs give the same index digest.
	again, err := imagebuild.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := idx.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("same inputs, digests %s and %s", d1, d2)
	}
}

type file struct {
	data []byte
	mode int64
	uid  int
}

func flatten(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = file{data: b, mode: h.Mode, uid: h.Uid}
	}
}
