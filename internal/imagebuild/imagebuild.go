// Package imagebuild builds the configpub container image without a Docker
// daemon: an OCI image FROM scratch with a base layer written here (passwd
// and group files with a non-root user, a home and a /tmp, optional CA
// certificates) and a layer holding the configpub binary, whose config runs
// `configpub serve` as that user. Images for several platforms are written
// as one OCI image index into an OCI layout directory (what `crane push`
// and `oras copy --from-oci-layout` upload).
package imagebuild

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's non-root user (the uid distroless images call nonroot).
const (
	UID      = 65532
	UserName = "nonroot"
	// BinaryPath is where the binary is installed.
	BinaryPath = "/usr/local/bin/configpub"
	// Port is the port the Config Server listens on in the image.
	Port = 8080
)

// Platform is one image to build: the binary for it and its os/arch.
type Platform struct {
	OS, Arch string
	Binary   string // path of the configpub binary built for OS/Arch
}

// Options describe an image.
type Options struct {
	Platforms []Platform
	// Version and Commit become the OCI version and revision labels.
	Version, Commit string
	// Created is the image's creation time (SOURCE_DATE_EPOCH for a
	// reproducible build; zero is the Unix epoch). Every file carries it.
	Created time.Time
	// CACertificates, when set, is a PEM bundle installed as
	// /etc/ssl/certs/ca-certificates.crt (for registries and databases
	// reached over TLS).
	CACertificates string
}

// Build returns the image index of every platform in opts.
func Build(opts Options) (v1.ImageIndex, error) {
	if len(opts.Platforms) == 0 {
		return nil, fmt.Errorf("imagebuild: no platform to build")
	}
	var adds []mutate.IndexAddendum
	for _, p := range opts.Platforms {
		img, err := Image(p, opts)
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...), nil
}

// Image builds the image of one platform.
func Image(p Platform, opts Options) (v1.Image, error) {
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: binary for %s/%s: %w", p.OS, p.Arch, err)
	}
	var ca []byte
	if opts.CACertificates != "" {
		if ca, err = os.ReadFile(opts.CACertificates); err != nil {
			return nil, fmt.Errorf("imagebuild: CA certificates: %w", err)
		}
	}
	created := opts.Created.UTC()
	if created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}
	base, err := baseLayer(created, ca)
	if err != nil {
		return nil, err
	}
	app, err := tarLayer(created, []entry{{path: "usr/local/bin/configpub", mode: 0o755, data: bin}}, []string{"usr", "usr/local", "usr/local/bin"})
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer})
	if err != nil {
		return nil, fmt.Errorf("imagebuild: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("imagebuild: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:         strconv.Itoa(UID) + ":" + strconv.Itoa(UID),
		Entrypoint:   []string{BinaryPath, "serve"},
		Cmd:          []string{"--listen", ":" + strconv.Itoa(Port)},
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/" + UserName, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		WorkingDir:   "/home/" + UserName,
		ExposedPorts: map[string]struct{}{strconv.Itoa(Port) + "/tcp": {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "configpub",
			"org.opencontainers.image.source":   "https://github.com/configpub/configpub",
			"org.opencontainers.image.version":  opts.Version,
			"org.opencontainers.image.revision": opts.Commit,
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: %w", err)
	}
	return img, nil
}

// WriteLayout writes idx as a new OCI layout directory at dir.
func WriteLayout(dir string, idx v1.ImageIndex) error {
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("imagebuild: write OCI layout %s: %w", dir, err)
	}
	return nil
}

// baseLayer is what a distroless static image provides that configpub
// needs: the users, a writable home and /tmp, and CA certificates.
func baseLayer(created time.Time, ca []byte) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n",
		UserName, UID, UID, UserName, UserName)
	group := fmt.Sprintf("root:x:0:\nnobody:x:65534:\n%s:x:%d:\n", UserName, UID)
	files := []entry{
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
	}
	dirs := []string{"etc", "home", "root", "tmp", "home/" + UserName}
	if ca != nil {
		dirs = append(dirs, "etc/ssl", "etc/ssl/certs")
		files = append(files, entry{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca})
	}
	return tarLayer(created, files, dirs)
}

type entry struct {
	path string
	mode int64
	data []byte
}

// tarLayer writes directories then files, owned by root except the user's
// home (the user's) and /tmp (sticky, world-writable), all at created.
func tarLayer(created time.Time, files []entry, dirs []string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range dirs {
		h := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: created, Format: tar.FormatPAX}
		switch d {
		case "tmp":
			h.Mode = 0o1777
		case "root":
			h.Mode = 0o700
		case "home/" + UserName:
			h.Mode, h.Uid, h.Gid = 0o700, UID, UID
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.path, Mode: f.mode, Size: int64(len(f.data)), ModTime: created, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("imagebuild: layer: %w", err)
	}
	return l, nil
}
