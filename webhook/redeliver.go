package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/configpub/configpub/promoter"
)

// RedeliverWindow is how far back webhook redeliver looks by default (its
// --since), and the window of the console's undelivered-events gauge: a
// week, so that a receiver down over a long weekend — three days and the
// time to notice — still gets the first event it missed. An event older
// than the window is no longer sent.
const RedeliverWindow = 7 * 24 * time.Hour

// RedeliverMinAge is how recent an event webhook redeliver leaves to the
// deliveries that may still be retrying it by default (its --min-age), and
// the console's undelivered-events gauge leaves out likewise.
const RedeliverMinAge = 2 * time.Minute

// Pending lists the recorded events a receiver has not accepted.
type Pending interface {
	// Undelivered lists, oldest first, the events recorded in [from, to)
	// that were sent to receiver (as Attempt.Receiver names it), to no
	// receiver, or to others while receiver was in use, and that it has
	// neither accepted nor refused for good: a receiver configured later
	// is not sent what happened before.
	Undelivered(ctx context.Context, receiver string, from, to time.Time) ([]promoter.Event, error)
}

// RedeliverResult is what Redeliver did.
type RedeliverResult struct {
	From        time.Time            `json:"from"` // events recorded from (inclusive)
	To          time.Time            `json:"to"`   // events recorded before
	Receivers   []ReceiverRedelivery `json:"receivers"`
	Delivered   int                  `json:"delivered"`   // events accepted, over every receiver
	Undelivered int                  `json:"undelivered"` // events still not accepted, over every receiver
}

// ReceiverRedelivery is what Redeliver did for one receiver.
type ReceiverRedelivery struct {
	Receiver    string `json:"receiver"` // scheme://host/… and a digest of the URL
	Pending     int    `json:"pending"`  // events it had not accepted
	Delivered   int    `json:"delivered"`
	Undelivered int    `json:"undelivered"` // Pending − Delivered: refused, or not tried after a failure
}

// Redeliver sends each receiver, oldest first and one at a time, the
// events recorded in [from, to) that were sent to it and that it has
// neither accepted nor refused for good, with the usual retries and the
// same event ids (receivers drop duplicates by id). An event the receiver
// refuses for good now is counted as undelivered and never listed again; a
// receiver that still fails an event after its retries is left for a later
// run: its remaining events are counted as undelivered and not tried.
// Every attempt is recorded in the Log.
func (n *Notifier) Redeliver(ctx context.Context, p Pending, from, to time.Time) (*RedeliverResult, error) {
	res := &RedeliverResult{From: from, To: to}
	// Every receiver's list is read before anything is sent: an event sent
	// to no receiver yet is every receiver's, not only the first one's.
	pending := make([][]promoter.Event, len(n.receivers))
	for i, r := range n.receivers {
		events, err := p.Undelivered(ctx, r.name, from, to)
		if err != nil {
			return res, err
		}
		pending[i] = events
	}
	for i, r := range n.receivers {
		events := pending[i]
		rr := ReceiverRedelivery{Receiver: r.name, Pending: len(events)}
		for _, ev := range events {
			body, err := json.Marshal(Payload{Text: ev.Text(), Event: ev})
			if err != nil {
				return res, fmt.Errorf("webhook: encode event %s: %w", ev.ID, err)
			}
			o := n.deliver(ctx, r, ev, body)
			if o == failed {
				break // still down: its remaining events wait for a later run
			}
			if o == accepted {
				rr.Delivered++
			}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		rr.Undelivered = rr.Pending - rr.Delivered
		res.Receivers = append(res.Receivers, rr)
		res.Delivered += rr.Delivered
		res.Undelivered += rr.Undelivered
	}
	return res, nil
}
