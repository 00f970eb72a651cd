package main

import "github.com/spf13/cobra"

// Help groups, in the order `configpub --help` lists them.
var helpGroups = []*cobra.Group{
	{ID: "author", Title: "Write and review policy:"},
	{ID: "release", Title: "Publish, promote and move releases:"},
	{ID: "run", Title: "Serve and run:"},
	{ID: "inspect", Title: "Inspect:"},
	{ID: "other", Title: "Other:"},
}

// verbGroup places each top-level verb in a help group.
var verbGroup = map[string]string{
	"init": "author", "compile": "author", "plan": "author", "validate": "author", "workflow": "author",
	"keygen": "release", "publish": "release", "pull": "release", "verify-oci": "release", "promote": "release",
	"activate": "release", "rollback": "release", "revoke": "release", "reconcile": "release", "lease": "release", "db": "release", "webhook": "release",
	"gate":  "run",
	"serve": "run", "fetch": "run", "token": "run", "registry": "run", "console": "run",
	"status": "inspect", "history": "inspect", "readback": "inspect",
	"demo": "other", "version": "other", "completion": "other", "help": "other",
}

// verbExamples is the example of each verb that does not carry its own.
var verbExamples = map[string]string{
	"configpub compile": `  configpub compile --repo . --env dev                 # rewrite releases/dev.yaml when the sources changed
  configpub compile --repo . --env dev --check         # CI: exit 1 when releases/dev.yaml is stale
  configpub compile --repo . --env dev --out build/    # also write values.yml per target`,
	"configpub plan": `  configpub plan --repo . --env dev
  configpub plan --repo . --env prod --base-ref origin/main --output markdown`,
	"configpub validate": `  configpub validate build/dev/app.example.com/com.example.assistant/values.yml
  configpub validate build/dev/app.example.com/com.example.assistant/values.yml --repo .   # and compare with releases/dev.yaml`,
	"configpub keygen":  `  COSIGN_PASSWORD=… configpub keygen --out keys/`,
	"configpub publish": `  COSIGN_PASSWORD=… configpub publish --repo . --env dev --registry registry.example.com/policy --key keys/cosign.key`,
	"configpub pull":    `  configpub pull registry.example.com/policy/dev/app.example.com/com.example.assistant@sha256:… --out values.yml`,
	"configpub verify-oci": `  configpub verify-oci registry.example.com/policy/dev/app.example.com/com.example.assistant@sha256:… --trust-key keys/cosign.pub
  configpub verify-oci "$(configpub publish … -o json | jq -r .releaseArtifact)" --trust-key keys/cosign.pub -o json`,
	"configpub promote": `  COSIGN_PASSWORD=… configpub promote --repo . --env prod --registry registry.example.com/policy --key keys/cosign.key \
      --database "$CONFIGPUB_DATABASE_URL"
  # a monorepo's policy/ in a bare mirror (a checkout names it with --repo policy)
  configpub promote --repo /srv/git/monorepo.git --path policy --env prod --registry registry.example.com/policy --key keys/cosign.key`,
	"configpub activate": `  configpub activate --env prod --release 7 --reason "forward fix verified" --actor alice --key keys/cosign.key`,
	"configpub rollback": `  configpub rollback --env prod --release 6 --reason "error rate after release 7" --actor alice --key keys/cosign.key`,
	"configpub revoke": `  configpub revoke --snapshot 3f0c9a52-7d1e-4b8a-9c61-2f5e8d4b7a10 --reason "leaked prompt"
  configpub revoke --publication 9d1e… --reason "bad release"`,
	"configpub reconcile":         `  configpub reconcile --env prod`,
	"configpub gate":              "  configpub gate --env prod --key keys/cosign.key\n  configpub gate --env prod --key keys/cosign.key --once",
	"configpub lease resign":      "  configpub lease resign --env prod --reason \"restored from the 02:00 backup\" --key keys/cosign.key",
	"configpub lease renew":       "  configpub lease renew --env prod --key keys/cosign.key\n  configpub lease renew --env prod --key keys/cosign.key --interval 2m",
	"configpub db migrate":        `  configpub db migrate --database postgres://configpub_owner:…@db:5432/configpub`,
	"configpub db gc":             "  configpub db gc --database postgres://promoter:…@db:5432/configpub --dry-run\n  configpub db gc --min-age 72h",
	"configpub db keys":           "  configpub db keys --database postgres://promoter:…@db:5432/configpub\n  configpub db keys --output json   # with each public key as PEM",
	"configpub webhook redeliver": "  CONFIGPUB_WEBHOOK_URLS=https://hooks.example.com/configpub CONFIGPUB_WEBHOOK_SECRET=… \\\n      configpub webhook redeliver --database postgres://promoter:…@db:5432/configpub --since 24h",
	"configpub serve":             `  configpub serve --database "$CONFIGPUB_DATABASE_URL" --listen :8080 --jwks https://login.example.com/jwks.json --issuer https://login.example.com --audience configpub`,
	"configpub fetch": `  configpub fetch --server https://config.example.com --token-file /var/run/token --host app.example.com \
      --service-id com.example.assistant --env prod --config-audience agent --trust-key cosign.pub \
      --cache-dir /var/lib/configpub --out /etc/assistant/values.yml --watch`,
	"configpub token":          `  configpub token --key signing-key.pem --issuer https://login.example.com --audience configpub --host app.example.com --service-id com.example.assistant --env dev --config-audience agent`,
	"configpub token keygen":   `  configpub token keygen --out tokens/`,
	"configpub registry serve": `  configpub registry serve --dir /var/lib/registry --listen 127.0.0.1:5000`,
	"configpub registry republish": `  COSIGN_PASSWORD=… configpub registry republish --env prod --registry registry.example.com/policy --key keys/cosign.key \
      --database "$CONFIGPUB_DATABASE_URL"
  configpub registry republish --env prod --release 6 --registry registry.example.com/policy --key keys/cosign.key   # before a rollback to 6`,
	"configpub console":       `  configpub console --database "$CONFIGPUB_VIEWER_DATABASE_URL" --listen 127.0.0.1:8081`,
	"configpub status":        "  configpub status --env prod\n  configpub status --env prod --output json",
	"configpub history":       "  configpub history --env prod\n  configpub history --env prod --target app.example.com/com.example.assistant\n  configpub history --env prod --revocations",
	"configpub workflow diff": `  configpub workflow diff 3f0c9a52-7d1e-4b8a-9c61-2f5e8d4b7a10 1.0.0 1.1.0 --repo .`,
	"configpub demo":          "  configpub demo\n  make demo",
}

// organizeHelp groups the verbs and gives every runnable verb an example.
// A verb that declares its own Example keeps it.
func organizeHelp(root *cobra.Command) {
	root.AddGroup(helpGroups...)
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
	for _, c := range root.Commands() {
		if g, ok := verbGroup[c.Name()]; ok {
			c.GroupID = g
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			c.Example = verbExamples[c.CommandPath()]
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
