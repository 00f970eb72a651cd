package auth

import (
	"context"
	"strings"
	"sync"
)

// OpenKeys loads the verification keys named by spec: an http(s) URL of a
// JWKS, fetched now and then refreshed every opts.Interval by a goroutine
// counted in wg that ends with ctx, or a key file (JWKS or PEM) read once.
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
	keys, err := LoadKeyFile(spec)
	if err != nil {
		return nil, err
	}
	return NewStaticKeys(keys), nil
}
