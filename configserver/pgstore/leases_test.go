package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/pointernote"
	"github.com/configpub/configpub/internal/simclock"
)

// TestLeaseEndsMatchTheWalkOverLoadsRenewalsMovesAndRetirements holds the
// lease index (Stats().LeaseEnds) to the walk of every pointer it replaced
// (leaseEndsWalk) and to the test's own model, on a real PostgreSQL, over
// simulated months of daily renewals: a first load (reconcile), renewals
// that move an environment's earliest end later and one pointer's earlier,
// moves to new snapshots, retirements (of the earliest pointer, then of a
// whole environment, whose series goes), a revocation (a full reload) and
// a retirement undone. Both ways a store follows: LISTEN (each identity
// notified: applyBatch) and polling (catchUp and its install).
func TestLeaseEndsMatchTheWalkOverLoadsRenewalsMovesAndRetirements(t *testing.T) {
	for _, mode := range []string{"listen", "poll"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, owner, sd := newSeed(t)
			clock := simclock.New(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
			envs := []string{"prod", "stage", "dev"}
			var targets []*leaseTarget
			for _, env := range envs {
				for i := range 6 {
					targets = append(targets, &leaseTarget{id: bundle.Identity{Host: fmt.Sprintf("h%d.example", i), ServiceID: "gw", EnvTag: env}})
				}
			}
			// model: each identity's lease end, absent when retired or revoked.
			model := map[bundle.Identity]time.Time{}
			notify := func(tg *leaseTarget, retired bool) string {
				if mode != "listen" {
					return ""
				}
				b, err := json.Marshal(pointernote.Note{Host: tg.id.Host, ServiceID: tg.id.ServiceID, EnvTag: tg.id.EnvTag, Retired: retired})
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			// write moves tg (to a new snapshot when move is set, else
			// re-signs the one it has: a renewal) with a lease ending at end.
			write := func(tg *leaseTarget, end time.Time, move bool) {
				t.Helper()
				if move || tg.cur == nil {
					tg.release++
					tg.cur = sd.snapshot(t, owner, tg.id, tg.release)
				}
				sd.expires = end.Truncate(time.Second)
				sd.move(t, owner, tg.cur, notify(tg, false))
				model[tg.id] = sd.expires
			}
			retire := func(tg *leaseTarget) {
				t.Helper()
				if _, err := owner.Exec(ctx, `UPDATE configpub.current_pointer SET retired_at = now(), retired_release_version = $4
					WHERE host = $1 AND service_id = $2 AND env_tag = $3`, tg.id.Host, tg.id.ServiceID, tg.id.EnvTag, tg.release+1); err != nil {
					t.Fatal(err)
				}
				if n := notify(tg, true); n != "" {
					if _, err := owner.Exec(ctx, pointernote.SendSQL, n); err != nil {
						t.Fatal(err)
					}
				}
				delete(model, tg.id)
			}
			want := func() map[string]time.Time {
				ends := map[string]time.Time{}
				for id, end := range model {
					if cur, ok := ends[id.EnvTag]; !ok || end.Before(cur) {
						ends[id.EnvTag] = end
					}
				}
				return ends
			}
			var st *Store
			// check waits until the walk of the pointers says what the
			// model does, then compares the index with it.
			check := func(step string) {
				t.Helper()
				w := want()
				deadline := time.Now().Add(5 * time.Second)
				for !maps.EqualFunc(leaseEndsWalk(st), w, time.Time.Equal) {
					if time.Now().After(deadline) {
						t.Fatalf("%s: the store's pointers give lease ends %v after 5s, want %v", step, leaseEndsWalk(st), w)
					}
					time.Sleep(5 * time.Millisecond)
				}
				if got := st.Stats().LeaseEnds; !maps.EqualFunc(got, w, time.Time.Equal) {
					t.Fatalf("%s: Stats().LeaseEnds = %v, want %v (the walk of every pointer)", step, got, w)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for _, tg := range targets {
				write(tg, clock.Now().Add(time.Duration(15+rng.IntN(60))*time.Minute), false)
			}
			opts := Options{ReconcileInterval: time.Hour}
			if mode == "poll" {
				opts = Options{FollowInterval: 20 * time.Millisecond}
			}
			st = runStore(t, db.URLFor(t, "configpub_server"), opts)
			check("first load")
			for day := range 60 {
				clock.Advance(24 * time.Hour)
				now := clock.Now()
				switch day {
				case 10: // the earliest pointer of prod moves to a new snapshot with a later lease
					write(earliest(model, "prod", targets), now.Add(time.Hour), true)
				case 20: // the earliest pointer of stage retires
					retire(earliest(model, "stage", targets))
				case 30: // dev retires whole: its series goes
					for _, tg := range targets {
						if tg.id.EnvTag == "dev" {
							retire(tg)
						}
					}
				case 40: // a revocation of prod's earliest snapshot reloads every pointer
					tg := earliest(model, "prod", targets)
					if _, err := owner.Exec(ctx, `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
						VALUES ($1, 'test', 'test', now())`, tg.cur.snapshotID); err != nil {
						t.Fatal(err)
					}
					delete(model, tg.id)
					if mode == "listen" {
						// Its identity notified first: the reload finds no
						// servable row and removes the pointer (applyBatch);
						// then the revocation reloads every pointer.
						if _, err := owner.Exec(ctx, pointernote.SendSQL, notify(tg, false)); err != nil {
							t.Fatal(err)
						}
						check(fmt.Sprintf("day %d: revoked identity reloaded", day))
						if _, err := owner.Exec(ctx, pointernote.SendSQL, fmt.Sprintf(`{"revoked":true,"snapshotId":%q}`, tg.cur.snapshotID)); err != nil {
							t.Fatal(err)
						}
					}
					check(fmt.Sprintf("day %d: revocation", day))
					write(tg, now.Add(30*time.Minute), true) // and a new snapshot is activated
				case 50: // dev comes back: moved to new snapshots
					for _, tg := range targets {
						if tg.id.EnvTag == "dev" {
							write(tg, now.Add(time.Duration(20+rng.IntN(20))*time.Minute), true)
						}
					}
				default: // daily renewal of every live pointer; one of each environment renewed for less
					short := map[string]bool{}
					for _, tg := range targets {
						if _, live := model[tg.id]; !live {
							continue
						}
						end := now.Add(time.Duration(15+rng.IntN(60)) * time.Minute)
						if !short[tg.id.EnvTag] && rng.IntN(3) == 0 {
							short[tg.id.EnvTag], end = true, now.Add(5*time.Minute)
						}
						write(tg, end, false)
					}
				}
				check(fmt.Sprintf("day %d (%s)", day, now.Format(time.DateOnly)))
			}
			if n := len(want()); n != len(envs) {
				t.Fatalf("%d environments with leases at the end, want %d", n, len(envs))
			}
		})
	}
}

// leaseTarget is one identity of the test: its current snapshot and
// release.
type leaseTarget struct {
	id      bundle.Identity
	cur     *snap
	release int64
}

// earliest is the target of env whose lease in model ends first.
func earliest(model map[bundle.Identity]time.Time, env string, targets []*leaseTarget) *leaseTarget {
	var best *leaseTarget
	var bestEnd time.Time
	for _, tg := range targets {
		end, ok := model[tg.id]
		if ok && tg.id.EnvTag == env && (best == nil || end.Before(bestEnd)) {
			best, bestEnd = tg, end
		}
	}
	return best
}

// TestLeaseIndexMatchesTheWalkUnderRandomChanges holds the lease index to
// the walk of every pointer after each of 5,000 random changes to 400
// identities in 4 environments — renewals and moves (install), pointers
// retired or made unservable, removals, and full loads that keep some
// entries and replace others (load) — so that heaps of hundreds move
// through every path of replace, fix and the heapify of a load.
func TestLeaseIndexMatchesTheWalkUnderRandomChanges(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s := &Store{pointers: make(map[bundle.Identity]*entry), artifact: newByteCache(1 << 20)}
	seq := 0
	newEntry := func(id bundle.Identity) *entry {
		seq++
		d := &configserver.Delivery{Identity: id, SnapshotID: fmt.Sprintf("snap-%d", seq), ArtifactDigest: "sha256:x",
			Manifest: fmt.Appendf(nil, `{"sequence":%d}`, seq), ManifestSignature: "sig", ManifestKeyID: "kid",
			ExpiresAt: base.Add(time.Duration(rng.IntN(100_000)) * time.Second).Format(time.RFC3339Nano)}
		switch rng.IntN(12) {
		case 0:
			return &entry{d: d, retired: true}
		case 1:
			return &entry{d: d, err: configserver.ErrIntegrity}
		case 2:
			d.ExpiresAt = "" // no lease end to index
		}
		d.Prepare()
		return &entry{d: d}
	}
	identity := func() bundle.Identity {
		i := rng.IntN(400)
		return bundle.Identity{Host: fmt.Sprintf("h%d", i), ServiceID: "gw", EnvTag: fmt.Sprintf("env-%d", i%4)}
	}
	for op := range 5000 {
		switch r := rng.IntN(100); {
		case r < 70:
			var entries []*entry
			for range 1 + rng.IntN(20) {
				entries = append(entries, newEntry(identity()))
			}
			s.install(entries, nil)
		case r < 95:
			var gone []bundle.Identity
			for range 1 + rng.IntN(5) {
				gone = append(gone, identity())
			}
			s.install(nil, gone)
		default:
			next := make(map[bundle.Identity]*entry)
			for id, e := range s.pointers {
				switch rng.IntN(3) {
				case 0: // unchanged: the same entry
					next[id] = e
				case 1:
					next[id] = newEntry(id)
				}
			}
			s.load(next, nil)
		}
		if got, want := s.Stats().LeaseEnds, leaseEndsWalk(s); !maps.EqualFunc(got, want, time.Time.Equal) {
			t.Fatalf("after change %d: Stats().LeaseEnds = %v, want %v (the walk of every pointer)", op, got, want)
		}
	}
}
