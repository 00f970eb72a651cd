package pgtest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier is what Grants reads the catalog through (a pool or connection).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Grants returns, sorted, everything role may do in the current database
// as the catalog says (privileges it inherits from roles it is a member of
// included): "SCHEMA.RELATION PRIVILEGE" for every table, view and
// sequence privilege (column privileges count for their table), "schema
// NAME USAGE|CREATE" for every schema but pg_catalog, information_schema
// and public, "member of ROLE" and "attribute SUPERUSER|CREATEDB|...". A
// privilege test compares it with an explicit inventory.
func Grants(ctx context.Context, q Querier, role string) ([]string, error) {
	rows, err := q.Query(ctx, `
		SELECT n.nspname || '.' || c.relname || ' ' || p.priv
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p(priv)
		WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
		  AND (has_table_privilege($1, c.oid, p.priv)
		       OR (p.priv IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES') AND has_any_column_privilege($1, c.oid, p.priv)))
		UNION ALL
		SELECT n.nspname || '.' || c.relname || ' ' || p.priv
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		CROSS JOIN unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) p(priv)
		WHERE c.relkind = 'S' AND has_sequence_privilege($1, c.oid, p.priv)
		UNION ALL
		SELECT 'schema ' || n.nspname || ' ' || p.priv
		FROM pg_namespace n CROSS JOIN unnest(ARRAY['USAGE', 'CREATE']) p(priv)
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', 'public') AND n.nspname NOT LIKE 'pg_temp%'
		  AND n.nspname NOT LIKE 'pg_toast_temp%' AND has_schema_privilege($1, n.oid, p.priv)
		UNION ALL
		SELECT 'member of ' || g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
		WHERE m.member = (SELECT oid FROM pg_roles WHERE rolname = $1)
		UNION ALL
		SELECT 'attribute ' || a FROM pg_roles r, unnest(ARRAY[
			CASE WHEN r.rolsuper THEN 'SUPERUSER' END, CASE WHEN r.rolcreatedb THEN 'CREATEDB' END,
			CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END, CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END,
			CASE WHEN r.rolreplication THEN 'REPLICATION' END, CASE WHEN r.rolcanlogin THEN 'LOGIN' END]) a
		WHERE r.rolname = $1 AND a IS NOT NULL
		ORDER BY 1`, role)
	if err != nil {
		return nil, fmt.Errorf("pgtest: grants of %s: %w", role, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgtest: grants of %s: %w", role, err)
	}
	return out, nil
}
