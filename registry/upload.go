package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// This file holds the one request oras-go v2 has no API for: the OCI
// distribution-spec "single POST" monolithic blob upload
// (POST /v2/<name>/blobs/uploads/?digest=<d> with the blob as the body),
// which stores a small blob in one request instead of two. A registry may
// ignore the digest and answer 202 Accepted with an upload session instead
// (CNCF Distribution v3.1 does); the upload is then finished with the PUT
// of the two-step protocol, and the registry is remembered so later blobs
// go straight to oras-go's POST+PUT. Requests go through the Client's
// oras-go auth client, so credentials, token scopes and retries apply
// exactly as to every other request.

// monolithic remembers, per registry host, whether single-POST uploads
// create the blob.
type monolithic struct {
	mu          sync.Mutex
	unsupported map[string]bool
}

func (m *monolithic) supported(host string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.unsupported[host]
}

func (m *monolithic) setUnsupported(host string) {
	m.mu.Lock()
	if m.unsupported == nil {
		m.unsupported = map[string]bool{}
	}
	m.unsupported[host] = true
	m.mu.Unlock()
}

// remoteTarget is an oras-go remote repository with the single-POST
// upload as its bytesPusher capability.
type remoteTarget struct {
	*remote.Repository
	c *Client
}

// pushBytes stores data (described by desc) in the repository: one
// single-POST request where the registry supports it, POST+PUT otherwise.
func (t *remoteTarget) pushBytes(ctx context.Context, desc ocispec.Descriptor, data []byte) error {
	c, repo := t.c, t.Repository
	host := repo.Reference.Host()
	if !c.mono.supported(host) {
		if err := repo.Push(ctx, desc, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return fmt.Errorf("push blob %s: %w", desc.Digest, err)
		}
		return nil
	}
	ctx = auth.AppendRepositoryScope(ctx, repo.Reference, auth.ActionPull, auth.ActionPush)
	u := &url.URL{
		Scheme:   scheme(c.plainHTTP),
		Host:     host,
		Path:     "/v2/" + repo.Reference.Repository + "/blobs/uploads/",
		RawQuery: url.Values{"digest": {desc.Digest.String()}}.Encode(),
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("push blob %s: %w", desc.Digest, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("push blob %s: %w", desc.Digest, err)
	}
	defer drain(resp)
	switch resp.StatusCode {
	case http.StatusCreated:
		return nil
	case http.StatusAccepted:
		// The registry opened an upload session and ignored the body.
		c.mono.setUnsupported(host)
		return c.finishUpload(ctx, req, resp, desc, data)
	}
	return fmt.Errorf("push blob %s: %w", desc.Digest, errorResponse(resp))
}

// finishUpload PUTs data to the upload session a 202 answer opened (the
// second step of the two-step monolithic upload).
func (c *Client) finishUpload(ctx context.Context, post *http.Request, resp *http.Response, desc ocispec.Descriptor, data []byte) error {
	loc, err := resp.Location()
	if err != nil {
		return fmt.Errorf("push blob %s: upload session: %w", desc.Digest, err)
	}
	// Never send credentials to another host, nor downgrade https (the
	// checks oras-go makes, GHSA-jxpm-75mh-9fp7).
	if loc.Hostname() != post.URL.Hostname() || port(loc) != port(post.URL) {
		return fmt.Errorf("push blob %s: upload Location host %q is not the registry %q", desc.Digest, loc.Host, post.URL.Host)
	}
	if post.URL.Scheme == "https" && loc.Scheme != "https" {
		return fmt.Errorf("push blob %s: upload Location %q downgrades from https", desc.Digest, loc.Host)
	}
	q := loc.Query()
	q.Set("digest", desc.Digest.String())
	loc.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, loc.String(), bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("push blob %s: %w", desc.Digest, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	put, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("push blob %s: %w", desc.Digest, err)
	}
	defer drain(put)
	if put.StatusCode != http.StatusCreated {
		return fmt.Errorf("push blob %s: %w", desc.Digest, errorResponse(put))
	}
	return nil
}

// errorResponse reads a registry error body into oras-go's error type, so
// callers see the same errors as from oras-go's own requests.
func errorResponse(resp *http.Response) error {
	var body struct {
		Errors errcode.Errors `json:"errors"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 8<<10)).Decode(&body)
	return &errcode.ErrorResponse{Method: resp.Request.Method, URL: resp.Request.URL, StatusCode: resp.StatusCode, Errors: body.Errors}
}

// drain reads what is left of a response body (bounded) and closes it, so
// the keep-alive connection goes back to the pool.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

func scheme(plainHTTP bool) string {
	if plainHTTP {
		return "http"
	}
	return "https"
}

// port returns u's port, the scheme's default when none is given.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
