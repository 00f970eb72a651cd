package pointernote

import (
	"encoding/json"
	"testing"
)

func TestMoveExprBuildsTheNoteKeys(t *testing.T) {
	got := MoveExpr("h", "sv", "$1::text", "sid", "seq", true)
	want := `pg_notify('configpub_pointer', json_build_object('host', h, 'serviceId', sv, 'envTag', $1::text, 'snapshotId', sid, 'sequence', seq, 'retired', true)::text)`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestRevocationPayloadKeepsItsEncoding(t *testing.T) {
	b, err := json.Marshal(Note{Revoked: true, RevocationID: 7, PublicationID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"revoked":true,"revocationId":7,"publicationId":"p"}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}
