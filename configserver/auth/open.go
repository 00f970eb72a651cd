package auth

import (
	"context"
	"strings"
	"sync"
)

// OpenKeys loads the verification keys named by spec: an http(s) URL of a
// JWKS or a key file (JWKS or PEM), read now and then again every
// opts.Interval by a goroutine counted in wg that ends with ctx.
func OpenKeys(ctx context.Context, spec string, opts RemoteOptions, wg *sync.WaitGroup) (KeySource, error) {
	if strings.HasPrefix(spec, "https://") || strings.HasPrefix(spec, "http://") {
		rk := NewRemoteKeys(spec, opts)
		if err := rk.Refresh(ctx); err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = rk.Run(ctx) }()
		return rk, nil
	}
	fk, err := NewFileKeys(spec, opts)
	if err != nil {
		return nil, err
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = fk.Run(ctx) }()
	return fk, nil
}
