package configserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
)

// FuzzEvidenceBody: a POST /configs/evidence body is accepted only as one
// JSON object and nothing after it, and what is accepted reads back the
// same when written again (parse, render, parse): the Evidence stored is a
// function of the fields, each of the documented form.
func FuzzEvidenceBody(f *testing.F) {
	now := time.Date(2026, 11, 29, 12, 30, 0, 0, time.UTC)
	good := `{"host":"h1.example","serviceId":"svc-a","envTag":"prod","audience":"agent","outcome":"APPLIED","reason":"NEW_SNAPSHOT",` +
		`"snapshotId":"0190a0b0-0000-8000-8000-000000000001","publicationId":"0190a0b0-0000-8000-8000-000000000002","releaseVersion":1,"sequence":7,` +
		`"currentSnapshotId":"0190a0b0-0000-8000-8000-000000000001","lastKnownGoodSnapshotId":"0190a0b0-0000-8000-8000-000000000001",` +
		`"artifactDigest":"sha256:` + string(bytes.Repeat([]byte("a"), 64)) + `","observedAt":"2026-11-29T12:00:00.123456789Z"}`
	for _, b := range []string{
		good,
		`{"host":"h1.example","serviceId":"svc-a","envTag":"prod","outcome":"REJECTED","reason":"PARSE_ERROR"}`,
		`{"host":"h1.example","serviceId":"svc-a","envTag":"prod","outcome":"REJECTED","reason":"PARSE_ERROR","Host":"h2"}`,
		`{"host":"h1\u0000","serviceId":"svc-a","envTag":"prod","outcome":"REJECTED"}`,
		`{"host":"h1.example","serviceId":"svc-a","envTag":"prod","outcome":"REJECTED"} {}`,
		`{"host":"h1.example","serviceId":"svc-a","envTag":"prod","outcome":"APPLIED"}`,
		`{"host":"h1.example","serviceId":"svc-a","envTag":"prod","outcome":"REJECTED","sequence":-1}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ev, herr := decodeEvidence(body, now)
		if herr != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted %q, which is not one JSON value", body)
		}
		if ev.Identity != (bundle.Identity{Host: req.Host, ServiceID: req.ServiceID, EnvTag: req.EnvTag}) {
			t.Fatalf("evidence for %v from a report for %s/%s/%s", ev.Identity, req.Host, req.ServiceID, req.EnvTag)
		}
		again, err := json.Marshal(bundle.EvidenceReport(*req))
		if err != nil {
			t.Fatal(err)
		}
		_, back, herr := decodeEvidence(again, now)
		if herr != nil {
			t.Fatalf("the accepted report written again is refused: %s\n%s", herr.message, again)
		}
		if !reflect.DeepEqual(back, ev) {
			t.Fatalf("the accepted report written again reads\n%+v\nnot\n%+v", back, ev)
		}
	})
}
