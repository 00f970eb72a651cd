package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/configserver"
)

// classify maps a database error to the configserver sentinels: no rows is
// ErrNotFound; an answer from the server (a SQL error) stays as it is; a
// connection failure or timeout is ErrUnavailable.
func classify(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", op, configserver.ErrNotFound)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, configserver.ErrUnavailable, err)
}

// integrityError reports stored data that must not be served.
func integrityError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", configserver.ErrIntegrity, fmt.Sprintf(format, args...))
}
