// Package pointernote is the PostgreSQL NOTIFY contract between the promoter,
// which signals pointer moves, retirements and revocations in the
// transaction that makes them, and the Config Server, which LISTENs and
// reloads the pointers a notification names. The channel, the payload and
// the SQL that sends it are defined here once.
package pointernote

// Channel is the NOTIFY channel pointer changes are signalled on.
const Channel = "configpub_pointer"

// Note is the JSON payload of a notification on Channel. A move or a
// retirement names one identity (Host, ServiceID, EnvTag) with the pointer's
// SnapshotID and Sequence; Retired is set when the identity was retired. A
// revocation names a snapshot or a publication, not an identity: Revoked is
// set and a listener reloads every pointer.
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
}

// SendSQL sends the JSON text $1 (an encoded Note) on Channel; it is
// delivered when, and only if, the transaction commits.
const SendSQL = `SELECT pg_notify('` + Channel + `', $1)`

// MoveExpr returns an SQL expression that sends the Note of one moved
// pointer on Channel, built from the SQL expressions host, serviceID,
// envTag, snapshotID and sequence; retired adds "retired": true.
func MoveExpr(host, serviceID, envTag, snapshotID, sequence string, retired bool) string {
	obj := `json_build_object('host', ` + host + `, 'serviceId', ` + serviceID + `, 'envTag', ` + envTag +
		`, 'snapshotId', ` + snapshotID + `, 'sequence', ` + sequence
	if retired {
		obj += `, 'retired', true`
	}
	return `pg_notify('` + Channel + `', ` + obj + `)::text)`
}
