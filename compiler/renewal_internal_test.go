package compiler

import (
	"fmt"
	"testing"
	"time"
)

// TestRenewOffsetsSpreadEvenly: hosts' offsets among their renewal times
// are whole seconds inside the spread, fall evenly on its days, and depend
// on the environment as well as the host.
func TestRenewOffsetsSpreadEvenly(t *testing.T) {
	const hosts, spread = 7000, 168 * time.Hour
	var perDay [7]int
	sameInOtherEnv := 0
	for i := range hosts {
		host := fmt.Sprintf("h%04d.example.net", i)
		o := renewOffset("prod", host, spread)
		if o < 0 || o >= spread || o%time.Second != 0 {
			t.Fatalf("offset of %s is %s, want whole seconds in [0, %s)", host, o, spread)
		}
		if again := renewOffset("prod", host, spread); again != o {
			t.Fatalf("offset of %s is %s, then %s", host, o, again)
		}
		if renewOffset("staging", host, spread) == o {
			sameInOtherEnv++
		}
		perDay[o/(24*time.Hour)]++
	}
	for d, n := range perDay {
		if n < hosts/7*85/100 || n > hosts/7*115/100 {
			t.Errorf("day %d of the spread holds %d of %d hosts, want %d ± 15%%: %v", d, n, hosts, hosts/7, perDay)
		}
	}
	if sameInOtherEnv > 5 {
		t.Errorf("%d of %d hosts have the same offset in two environments", sameInOtherEnv, hosts)
	}
	if o := renewOffset("prod", "h0000.example.net", 0); o != 0 {
		t.Errorf("offset without a spread is %s, want 0", o)
	}
}

// TestRenewalTimeIsTheHostsLastBeforeRenewBefore: a window is renewed at
// the last of the host's renewal times at or before renewBefore of it
// remains; without a spread, at renewBefore before its end.
func TestRenewalTimeIsTheHostsLastBeforeRenewBefore(t *testing.T) {
	p := leaseProfile{ValidFor: "504h", RenewBefore: "168h", RenewSpread: "168h"}
	start := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	for i := range 50 {
		r := renewalOf(p, "prod", fmt.Sprintf("h%02d.example.net", i))
		var prev time.Time
		for k := range 400 {
			until := start.Add(time.Duration(k) * 37 * time.Minute)
			at := r.at(until)
			last := until.Add(-r.before)
			if at.After(last) || !at.After(last.Add(-r.spread)) {
				t.Fatalf("%s: window until %s renewed at %s, want in (%s, %s]", r.host, until, at, last.Add(-r.spread), last)
			}
			if (at.Unix()-int64(r.offset/time.Second))%int64(r.spread/time.Second) != 0 {
				t.Fatalf("%s: renewed at %s, not one of its renewal times (offset %s, every %s)", r.host, at, r.offset, r.spread)
			}
			if at.Before(prev) {
				t.Fatalf("%s: a later window is renewed earlier (%s, then %s)", r.host, prev, at)
			}
			prev = at
		}
	}
	r := renewalOf(leaseProfile{ValidFor: "504h", RenewBefore: "168h"}, "prod", "h00.example.net")
	if until := start.Add(504 * time.Hour); !r.at(until).Equal(until.Add(-168 * time.Hour)) {
		t.Errorf("without a spread renewed at %s, want renewBefore before %s", r.at(until), until)
	}
}
