// Package pointernote is the PostgreSQL NOTIFY contract between the promoter,
// which signals pointer moves, retirements, renewals and revocations in the
// transaction that makes them, and the Config Server, which LISTENs and
// reloads the pointers a notification names. The channel, the payload and
// the SQL that sends it are defined here once.
//
// The operator console also LISTENs on ConsoleChannel, where what moves no
// pointer is announced per environment: release-journal inserts (a trigger
// of the schema) and new readback receipts.
//
// Pointer changes are notified in batches: one notification names a range
// of at most BatchSize identities of one environment, so that an activation
// of 100,000 pointers sends about fifty notifications, not 100,000, and a
// listener reloads each range with one query and keeps what did not change.
package pointernote

import "strconv"

// Channel is the NOTIFY channel pointer changes are signalled on.
const Channel = "configpub_pointer"

// ConsoleChannel is the NOTIFY channel of changes to an environment that
// move no pointer; its payload is {"envTag": ...}, the EnvTag of a Note.
const ConsoleChannel = "configpub_console"

// ConsoleSQL sends a ConsoleChannel notification for the environment $1.
const ConsoleSQL = `SELECT pg_notify('` + ConsoleChannel + `', json_build_object('envTag', $1::text)::text)`

// BatchSize is the most identities one notification's Range covers.
const BatchSize = 2000

// Note is the JSON payload of a notification on Channel. The promoter sends
// two forms:
//
//   - a batch: EnvTag and Range; the listener reloads every pointer of
//     EnvTag in the range (pointers in it that did not change reload to the
//     same values);
//   - a revocation: Revoked (and RevocationID, SnapshotID or PublicationID);
//     a revocation names a snapshot or a publication, not an identity, and
//     a listener reloads every pointer.
//
// The single-identity form (Host, ServiceID, EnvTag, with SnapshotID,
// Sequence and Retired) is what earlier promoters sent for each pointer;
// listeners still accept it.
//
// Field order is the encoding order of a revocation's payload.
type Note struct {
	Revoked       bool   `json:"revoked,omitempty"`
	RevocationID  int64  `json:"revocationId,omitempty"`
	Host          string `json:"host,omitempty"`
	ServiceID     string `json:"serviceId,omitempty"`
	EnvTag        string `json:"envTag,omitempty"`
	SnapshotID    string `json:"snapshotId,omitempty"`
	PublicationID string `json:"publicationId,omitempty"`
	Sequence      int64  `json:"sequence,omitempty"`
	Retired       bool   `json:"retired,omitempty"`
	Range         *Range `json:"range,omitempty"`
}

// Range is a run of identities of one environment in the database's
// (host, service_id) order, both ends included. Count is how many pointers
// of the run changed (the run may hold unchanged ones between them).
type Range struct {
	FromHost      string `json:"fromHost"`
	FromServiceID string `json:"fromServiceId"`
	ToHost        string `json:"toHost"`
	ToServiceID   string `json:"toServiceId"`
	Count         int    `json:"count"`
}

// RangeSQL is the condition that selects the identities of a Range from a
// table aliased p with columns env_tag, host and service_id; its parameters
// are $1 envTag, $2 FromHost, $3 FromServiceID, $4 ToHost, $5 ToServiceID.
// The comparison is the database's, the same that formed the range.
const RangeSQL = `p.env_tag = $1 AND (p.host, p.service_id) >= ($2::text, $3::text) AND (p.host, p.service_id) <= ($4::text, $5::text)`

// SendSQL sends the JSON text $1 (an encoded Note) on Channel; it is
// delivered when, and only if, the transaction commits.
const SendSQL = `SELECT pg_notify('` + Channel + `', $1)`

// BatchesSQL returns a statement that sends one batch Note per BatchSize
// identities of the rows of from (an SQL FROM item, e.g. "unnest($2::text[],
// $3::text[]) AS x(h, sv)" or a CTE name), whose host and service id are
// the SQL expressions host and serviceID; envTag is the SQL expression of
// the environment. The identities are ordered and cut into ranges by the
// database, so a listener's RangeSQL selects exactly the same runs. It
// returns the number of notifications sent (0 for no rows).
func BatchesSQL(envTag, host, serviceID, from string) string {
	return `SELECT count(pg_notify('` + Channel + `', json_build_object('envTag', ` + envTag + `,
		'range', json_build_object('fromHost', lo[1], 'fromServiceId', lo[2], 'toHost', hi[1], 'toServiceId', hi[2],
			'count', n))::text))
	FROM (SELECT min(ARRAY[h, sv]) AS lo, max(ARRAY[h, sv]) AS hi, count(*) AS n
		FROM (SELECT ` + host + ` AS h, ` + serviceID + ` AS sv,
				(row_number() OVER (ORDER BY ` + host + `, ` + serviceID + `) - 1) / ` + strconv.Itoa(BatchSize) + ` AS b
			FROM ` + from + `) g
		GROUP BY b) r`
}
