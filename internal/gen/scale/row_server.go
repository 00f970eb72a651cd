package main

import "context"

// serverRows measures a Config Server holding s.targets identities.
func serverRows(ctx context.Context, s *size) ([]row, error) {
	return []row{{figure: "server start-up", value: "not measured here yet"}}, nil
}
