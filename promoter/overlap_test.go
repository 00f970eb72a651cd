package promoter_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
)

// overlapRepo is the fixture policy repository with three reviewed releases
// of promotertest.Env: 1 (as is), 2 (the advisor and account Agents' prompts
// change, so their policy digests and the Gateway's and Knowledge's
// accepted lists change)
// and 3 (compatibilityGeneration raised from 3 to 4). It returns the
// repository, each release's merge commit and its target snapshots.
func overlapRepo(t *testing.T) (*promotertest.Repo, []plumbing.Hash, []map[string]string) {
	t.Helper()
	p := &promotertest.Repo{Git: gittest.New(t)}
	r := p.Git
	from := r.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("policy\n")}, Message: "initial"})
	files := gittest.ReadDir(t, filepath.Join("..", "fixtures", "policy-repo"))
	var merges []plumbing.Hash
	var snaps []map[string]string
	for i, change := range []func(map[string][]byte){
		func(map[string][]byte) {},
		func(f map[string][]byte) {
			promotertest.Replace(t, f, "agents/advisor.yaml", "You do not give", "You never give")
			promotertest.Replace(t, f, "agents/account.yaml", "Ask for confirmation", "Always ask for confirmation")
		},
		func(f map[string][]byte) {
			promotertest.Replace(t, f, "configpub.yaml", "compatibilityGeneration: 3", "compatibilityGeneration: 4")
		},
	} {
		change(files)
		v, res := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(time.Duration(i)*time.Hour))
		if res.Manifest.ReleaseVersion != int64(i+1) {
			t.Fatalf("compiled release %d, want %d", res.Manifest.ReleaseVersion, i+1)
		}
		files = v
		branch := fmt.Sprintf("release-%d", i+1)
		r.Commit(gittest.Commit{Branch: branch, From: from, Files: v, Message: branch})
		from = r.Merge(gittest.Main, branch, gittest.Commit{Message: "Merge " + branch,
			Trailers: []string{"Reviewed-by: Carol <carol@example.com>", "Approved-by: Erin <erin@example.com>"}})
		merges = append(merges, from)
		snaps = append(snaps, promotertest.SnapshotsOf(res))
	}
	return p, merges, snaps
}

// Fixture identities (host dev.lightapi.net).
const (
	advisorKey   = "dev.lightapi.net/com.networknt.agent-advisor-1.0.0"
	accountKey   = "dev.lightapi.net/com.networknt.agent-account-1.0.0"
	gatewayKey   = "dev.lightapi.net/com.networknt.light-gateway-1.0.0"
	knowledgeKey = "dev.lightapi.net/com.networknt.knowledge-1.0.0"
)

// testCallerHeader names the calling runtime to the receivers of this test.
// It stands in for the receiver's own authentication of the caller (mTLS
// client certificate or workload JWT), which a deployment provides.
const testCallerHeader = "X-Test-Authenticated-Caller"

func authenticatedCaller(r *http.Request) (bundle.Identity, error) {
	host, svc, ok := strings.Cut(r.Header.Get(testCallerHeader), "/")
	if !ok {
		return bundle.Identity{}, errors.New("no authenticated caller")
	}
	return bundle.Identity{Host: host, ServiceID: svc, EnvTag: promotertest.Env}, nil
}

// receiver serves c behind PeerMiddleware; an admitted call answers 200
// with how it was admitted.
func receiver(t *testing.T, c *client.Client) string {
	t.Helper()
	h, err := c.PeerMiddleware(client.PeerOptions{Caller: authenticatedCaller}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := client.PeerVerdictFromContext(r.Context())
		_, _ = w.Write([]byte(v.Via))
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// call sends a request from caller (its RoundTripper stamps the publication
// headers and assertion) as the authenticated runtime as, to url; tamper,
// when set, changes the stamped request. It returns the status and the
// refusal reason or the way it was admitted.
func call(t *testing.T, caller *client.Client, as, url string, tamper func(http.Header)) (int, string) {
	t.Helper()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if tamper != nil {
			tamper(r.Header)
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url+"/v1/answer", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(testCallerHeader, as)
	resp, err := (&http.Client{Transport: caller.RoundTripper(base)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, body.String()
	}
	var e struct{ Reason string }
	_ = json.Unmarshal(body.Bytes(), &e)
	return resp.StatusCode, e.Reason
}

// TestCrossServiceOverlapAcrossARelease: real promoter, PostgreSQL, registry
// and Config Server; runtimes of release 1 ("old") and release 2 ("new",
// the advisor Agent's policy changed) run side by side. Every combination
// of old/new Agent and old/new Gateway or Knowledge is admitted: the
// accepted list admits the old Agent at the new receiver (it names the
// previous release), the new Agent's signed delivery manifest admits it at
// the old receiver. A forged assertion, another Agent's assertion, one of an
// incompatible generation (release 3) and an unknown publication without an
// assertion are each refused with their own reason.
func TestCrossServiceOverlapAcrossARelease(t *testing.T) {
	h := promotertest.New(t)
	repo, merges, snaps := overlapRepo(t)
	h.Repo = repo
	fleets := make([]*runtimeFleet, 3)
	for i, m := range merges {
		if _, err := h.Promote(t, h.Options(m)); err != nil {
			t.Fatalf("promote release %d: %v", i+1, err)
		}
		fleets[i] = newRuntimeFleet(t, h)
		fleets[i].applyAll(t, snaps[i])
	}
	for _, k := range []string{advisorKey, accountKey, gatewayKey, knowledgeKey} {
		if snaps[0][k] == snaps[1][k] {
			t.Fatalf("release 2 does not change %s: the fixture change does not reach it", k)
		}
	}
	old, cur, gen4 := fleets[0].clients, fleets[1].clients, fleets[2].clients

	for _, recv := range []string{gatewayKey, knowledgeKey} {
		oldRecv, newRecv := receiver(t, old[recv]), receiver(t, cur[recv])
		for _, tc := range []struct {
			name   string
			caller *client.Client
			url    string
			via    string
		}{
			{"old Agent to old receiver", old[advisorKey], oldRecv, client.ViaAcceptedList},
			{"new Agent to new receiver", cur[advisorKey], newRecv, client.ViaAcceptedList},
			{"old Agent to new receiver", old[advisorKey], newRecv, client.ViaAcceptedList},
			{"new Agent to old receiver", cur[advisorKey], oldRecv, client.ViaAssertion},
		} {
			t.Run(recv+"/"+tc.name, func(t *testing.T) {
				if code, via := call(t, tc.caller, advisorKey, tc.url, nil); code != http.StatusOK || via != tc.via {
					t.Fatalf("got %d %s, want 200 admitted by %s", code, via, tc.via)
				}
			})
		}

		forge := func(h http.Header) {
			m, _ := base64.RawURLEncoding.DecodeString(h.Get(client.HeaderPeerManifest))
			f := bytes.Replace(m, []byte(`"releaseVersion":2`), []byte(`"releaseVersion":1`), 1)
			if bytes.Equal(f, m) {
				t.Error("the assertion has no releaseVersion 2 to forge")
			}
			h.Set(client.HeaderPeerManifest, base64.RawURLEncoding.EncodeToString(f))
		}
		strip := func(h http.Header) {
			h.Del(client.HeaderPeerManifest)
			h.Del(client.HeaderPeerManifestSignature)
			h.Del(client.HeaderPeerManifestKeyID)
		}
		seen := map[string]string{}
		for _, tc := range []struct {
			name   string
			caller *client.Client
			url    string
			tamper func(http.Header)
			want   client.Reason
		}{
			{"forged assertion", cur[advisorKey], oldRecv, forge, client.ReasonAssertionForged},
			{"another Agent's assertion", cur[accountKey], oldRecv, nil, client.ReasonPeerSubjectMismatch},
			{"incompatible generation at the old receiver", gen4[advisorKey], oldRecv, nil, client.ReasonIncompatibleGeneration},
			{"incompatible generation at the new receiver", gen4[advisorKey], newRecv, nil, client.ReasonIncompatibleGeneration},
			{"unknown publication without an assertion", cur[advisorKey], oldRecv, strip, client.ReasonUnknownPublication},
		} {
			t.Run(recv+"/"+tc.name, func(t *testing.T) {
				code, reason := call(t, tc.caller, advisorKey, tc.url, tc.tamper)
				if code != http.StatusForbidden || reason != string(tc.want) {
					t.Fatalf("got %d %s, want 403 %s", code, reason, tc.want)
				}
				if other, dup := seen[reason]; dup && !strings.HasPrefix(tc.name, "incompatible") {
					t.Fatalf("reason %s also given for %q", reason, other)
				}
				seen[reason] = tc.name
			})
		}
	}
}
