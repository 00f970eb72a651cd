package readback

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
)

// Target is one runtime whose status endpoint the collector reads.
type Target struct {
	// Endpoint is the base URL of the runtime's status handler (GET
	// <Endpoint>/status, POST <Endpoint>/reload).
	Endpoint  string `yaml:"endpoint" json:"endpoint"`
	Host      string `yaml:"host" json:"host"`
	ServiceID string `yaml:"serviceId" json:"serviceId"`
	EnvTag    string `yaml:"envTag" json:"envTag"`
}

// Identity returns the runtime identity the target is expected to answer for.
func (t Target) Identity() bundle.Identity {
	return bundle.Identity{Host: t.Host, ServiceID: t.ServiceID, EnvTag: t.EnvTag}
}

// Validate checks the endpoint is an http(s) URL without credentials and
// the identity is complete; envTag, when not "", must equal it.
func (t Target) Validate(envTag string) error {
	u, err := url.Parse(t.Endpoint)
	if err != nil {
		// url.Error repeats the URL as given, a password included.
		reason := err
		var ue *url.Error
		if errors.As(err, &ue) {
			reason = ue.Err
		}
		return fmt.Errorf("target %s: endpoint %q is not a URL: %v", t.Identity(), redactUserinfo(t.Endpoint), reason)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("target %s: endpoint %q is not an http(s) URL without credentials, query or fragment", t.Identity(), u.Redacted())
	}
	if t.Host == "" || t.ServiceID == "" || t.EnvTag == "" {
		return fmt.Errorf("target %q: host, serviceId and envTag are required", t.Endpoint)
	}
	if envTag != "" && t.EnvTag != envTag {
		return fmt.Errorf("target %s: envTag %q is not the environment %q", t.Identity(), t.EnvTag, envTag)
	}
	return nil
}

// redactUserinfo masks the user information of an endpoint that does not
// parse as a URL: what stands between "://" (or the start) and the last
// '@' before the path.
func redactUserinfo(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	rest := s[start:]
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
		rest = rest[:j]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	return s[:start] + "xxxxx" + s[start+at:]
}

// targetsFile is the YAML (or JSON) document --targets names.
type targetsFile struct {
	Targets []Target `yaml:"targets"`
}

// LoadTargets reads a targets file:
//
//	targets:
//	  - endpoint: https://agent-7.internal:9464
//	    host: dev.lightapi.net
//	    serviceId: com.networknt.agent-advisor-1.0.0
//	    envTag: dev
//
// Unknown fields are errors; every target must validate for envTag.
func LoadTargets(path, envTag string) ([]Target, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read targets: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f targetsFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) { // yaml's answer to an empty file
			return nil, fmt.Errorf("targets %s: empty file: want targets: [{endpoint, host, serviceId, envTag}, ...]", path)
		}
		return nil, fmt.Errorf("targets %s: %w", path, err)
	}
	if len(f.Targets) == 0 {
		return nil, fmt.Errorf("targets %s: no targets", path)
	}
	seen := map[bundle.Identity]bool{}
	for i, t := range f.Targets {
		if err := t.Validate(envTag); err != nil {
			return nil, fmt.Errorf("targets %s [%d]: %w", path, i, err)
		}
		if seen[t.Identity()] {
			return nil, fmt.Errorf("targets %s [%d]: %s listed twice (an identity is one runtime: its receipts and status are one; read one endpoint of instances that share it, or give each instance its own target)", path, i, t.Identity())
		}
		seen[t.Identity()] = true
	}
	return f.Targets, nil
}
