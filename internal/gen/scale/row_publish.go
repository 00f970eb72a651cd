package main

import "context"

// publishRows measures publishing the compiled release to a registry.
// Not measured by this version yet: see make bench-publish.
func publishRows(ctx context.Context, s *size) ([]row, error) {
	return []row{{figure: "publish", value: "not measured here yet", note: "see make bench-publish"}}, nil
}

// activationRows measures activating every pointer of the release.
// Not measured by this version yet: see the promoter's activation benchmarks.
func activationRows(ctx context.Context, s *size) ([]row, error) {
	return []row{{figure: "activation", value: "not measured here yet", note: "see the promoter's Activation benchmarks"}}, nil
}
