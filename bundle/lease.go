package bundle

import "time"

// LeaseWindow is a rolling delivery lease as offsets from a delivery
// manifest's issuedAt: a runtime refreshes after RefreshAfter and stops
// serving the snapshot after ExpiresAfter. The compiler produces it from a
// lease profile (whose manifest form is Lease) and the promoter records it.
type LeaseWindow struct {
	RefreshAfter time.Duration
	ExpiresAfter time.Duration
}
