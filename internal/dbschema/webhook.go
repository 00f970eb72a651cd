package dbschema

// UndeliveredEventsSQL lists the webhook events recorded in [$2, $3) that
// a receiver is owed: receiver ($1; NULL: every receiver with an
// attempt), event id, time recorded and the event (JSON). An event is a
// receiver's when it was sent to it (at least one attempt), or to other
// receivers while it was in use (it has attempts from before and after
// the event was recorded: the process stopped between their attempts and
// its own), and it has neither accepted it nor refused it for good (a 4xx
// other than 408 and 429). An event sent to no receiver at all (recorded
// with its state change, the process stopped before its first attempt)
// is every receiver's: it is listed once, with a NULL receiver. A
// receiver configured later is not owed what the others were sent before
// it, nor one no longer configured what they were sent after it.
//
// webhook redeliver (webhook.PGLog.Undelivered) sends a receiver its rows
// and the NULL ones; the console's configpub_webhook_undelivered_events
// counts them per receiver, the NULL ones under "none".
const UndeliveredEventsSQL = `WITH used AS (SELECT receiver, min(attempted_at) AS first, max(attempted_at) AS last
			FROM configpub.webhook_delivery WHERE $1::text IS NULL OR receiver = $1::text GROUP BY receiver),
		recent AS (SELECT e.event_id, e.recorded_at, e.event FROM configpub.webhook_event e
			WHERE e.recorded_at >= $2 AND e.recorded_at < $3)
	SELECT u.receiver, e.event_id, e.recorded_at, e.event FROM recent e JOIN used u
		ON EXISTS (SELECT 1 FROM configpub.webhook_delivery d WHERE d.event_id = e.event_id AND d.receiver = u.receiver)
			OR (e.recorded_at BETWEEN u.first AND u.last
				AND EXISTS (SELECT 1 FROM configpub.webhook_delivery d WHERE d.event_id = e.event_id))
	WHERE NOT EXISTS (SELECT 1 FROM configpub.webhook_delivery d WHERE d.event_id = e.event_id AND d.receiver = u.receiver
			AND (d.delivered OR (d.http_status BETWEEN 400 AND 499 AND d.http_status NOT IN (408, 429))))
	UNION ALL
	SELECT NULL, e.event_id, e.recorded_at, e.event FROM recent e
	WHERE NOT EXISTS (SELECT 1 FROM configpub.webhook_delivery d WHERE d.event_id = e.event_id)`
