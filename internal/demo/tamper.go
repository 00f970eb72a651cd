package demo

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// tamperProxy stands between a runtime and the Config Server and corrupts
// exactly the bodies of GET /configs responses: one byte flipped, every
// header left as the server sent it. It drops If-None-Match so the server
// answers with a body to corrupt. It is the demo's man in the middle.
type tamperProxy struct {
	srv      *http.Server
	url      string
	tampered atomic.Int64
}

func startTamperProxy(upstream string) (*tamperProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	p := &tamperProxy{}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Header.Del("If-None-Match")
	}}
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/configs" || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if len(body) > 0 {
			i := len(body) / 2
			body = bytes.Clone(body)
			body[i] ^= 0x01
			p.tampered.Add(1)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 5 * time.Second}
	p.url = "http://" + ln.Addr().String()
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *tamperProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}
