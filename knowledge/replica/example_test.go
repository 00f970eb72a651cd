package replica_test

import (
	"context"
	"errors"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/knowledge/replica"
)

// A Knowledge service's snapshot loader: migrate once as the database
// owner, then, after every load the runtime client applied, materialize the
// current snapshot's replicas through a pool of the loader role.
func Example() {
	ctx := context.Background()
	owner, err := pgx.Connect(ctx, "postgres://owner@db/knowledge")
	if err != nil {
		log.Fatal(err)
	}
	if err := replica.Migrate(ctx, owner); err != nil {
		log.Fatal(err)
	}
	loader, err := pgxpool.New(ctx, "postgres://knowledge_loader@db/knowledge") // a member of replica.LoaderRole
	if err != nil {
		log.Fatal(err)
	}
	// Follow the rollbacks the control plane signs; the zero value refuses
	// them (ErrRegression) and keeps the rolled-back release's replicas.
	store := replica.New(loader, replica.Options{AllowRollback: true})

	var c *client.Client // the runtime client, configured for audience knowledge
	if _, err := c.Load(ctx); err != nil {
		log.Printf("load: %v", err) // the last-known-good stays current; so do the replicas
	}
	snap, err := c.Current()
	if err != nil {
		log.Fatal(err) // failing closed
	}
	res, err := store.Apply(ctx, snap)
	switch {
	case errors.Is(err, replica.ErrRegression), errors.Is(err, replica.ErrIncomplete):
		log.Printf("replicas kept at the applied snapshot: %v", err)
	case err != nil:
		log.Fatal(err)
	default:
		log.Printf("%s %s: +%d ~%d -%d", res.Outcome, res.SnapshotID, res.Inserted, res.Updated, res.Deleted)
	}
}
