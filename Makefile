# configpub — see README.md. Every target does its own set-up.
GO      ?= go
BIN     := bin/configpub
PKGS    := ./...
GOFLAGS += -buildvcs=false
export GOFLAGS

.PHONY: all build release image test demo bench bench-smoke bench-watch bench-server bench-publish scale lint fuzz fuzz-smoke compat e2e ensure-postgres ensure-chromium clean

all: build

# configpub --version prints these; a build outside a Git checkout says devel.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/configpub

## release: static binaries for linux/darwin x amd64/arm64 into $(DIST), with
## SHA256SUMS; --version prints $(VERSION) and $(COMMIT).
DIST            ?= dist
RELEASE_TARGETS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
release:
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" TARGETS="$(RELEASE_TARGETS)" GO="$(GO)" ./scripts/release.sh $(DIST)

## image: the container image (linux/amd64 + linux/arm64) as an OCI layout in
## $(DIST)/image, built without a Docker daemon; push it with
## `crane push $(DIST)/image REF --index`.
CA_CERTIFICATES ?= $(wildcard /etc/ssl/certs/ca-certificates.crt)
image:
	VERSION="$(VERSION)" COMMIT="$(COMMIT)" TARGETS="linux/amd64 linux/arm64" GO="$(GO)" ./scripts/release.sh $(DIST)
	rm -rf $(DIST)/image
	$(GO) run ./internal/imagebuild/cmd/configpub-image --out $(DIST)/image --version "$(VERSION)" --commit "$(COMMIT)" \
		$(if $(CA_CERTIFICATES),--ca-certificates $(CA_CERTIFICATES)) \
		linux/amd64=$(DIST)/configpub_linux_amd64 linux/arm64=$(DIST)/configpub_linux_arm64

ensure-postgres:
	@./scripts/ensure-postgres.sh

ensure-chromium:
	@./scripts/ensure-chromium.sh

## test: every unit and integration test (starts a private PostgreSQL itself).
test: ensure-postgres
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 25m $(PKGS)
	$(GO) test -race -count=1 -timeout 10m ./configserver/client/ ./configserver/auth/ ./configserver/tlsfiles/ ./promote/review/

## demo: the whole pipeline end to end on embedded defaults.
demo: ensure-postgres build
	./$(BIN) demo

## bench: Go benchmarks with their in-run baselines (oras from .configpub/tools/bin when
## installed by make compat or bench-publish, else the publish benchmark skips its oras baseline).
bench: ensure-postgres
	PATH="$(CURDIR)/.configpub/tools/bin:$$PATH" $(GO) test -run '^$$' -bench . -benchmem -timeout 30m $(PKGS)

## bench-smoke: every benchmark once (-benchtime 1x) at the small sizes it picks under
## -short, so that a benchmark that fails, panics or no longer builds fails CI. oras from
## .configpub/tools/bin when installed (make compat or bench-publish), else its baseline is skipped.
bench-smoke: ensure-postgres
	PATH="$(CURDIR)/.configpub/tools/bin:$$PATH" $(GO) test -short -run '^$$' -bench . -benchtime 1x -benchmem -timeout 15m $(PKGS)

## bench-watch: 10,000 watchers holding GET /configs?wait= on one Config Server process (a
## child of the benchmark, so its memory is its own); one activation moves every pointer;
## reports p50/p99 from COMMIT to each watcher's 200 and server RSS per idle watcher.
## `make bench` runs it too (BenchmarkWatchers).
WATCHERS ?= 10000
bench-watch: ensure-postgres
	$(GO) test -run '^$$' -bench '^BenchmarkWatchers$$' -benchtime 1x -timeout 20m -v ./configserver/ -args -watch.n=$(WATCHERS)

## bench-server: bounded loopback load on the Config Server (1,000 identities, valid
## tokens) vs an in-run minimal net/http baseline serving the same bytes from memory;
## reports req/s, p50/p99 and CPU per request for 200 and 304, and the ratios (plus, for
## information, a baseline that sends the server's full header set from memory).
LOAD_DURATION    ?= 10s
LOAD_ROUNDS      ?= 10
LOAD_CONCURRENCY ?= 32
bench-server: ensure-postgres
	$(GO) test -run '^$$' -bench '^BenchmarkServerLoad$$' -benchtime 1x -timeout 10m -v ./configserver/ \
		-args -load.duration=$(LOAD_DURATION) -load.rounds=$(LOAD_ROUNDS) -load.concurrency=$(LOAD_CONCURRENCY) \
		-load.identities=1000 -load.headers-baseline

## compat: install pinned cosign, oras, crane and the Distribution registry binary
## (go install, into .configpub/tools/bin) and check published fixture artifacts
## with them against the embedded and the stand-alone registry.
compat: ensure-postgres
	./scripts/compat.sh
	PATH="$(CURDIR)/.configpub/tools/bin:$$PATH" $(GO) test -count=1 -v -run '^(TestCosignVerifiesServedManifest|TestVerifyScript)$$' ./configserver/

## bench-publish: publish 1,000 generated targets to a loopback in-process Distribution v3
## registry (filesystem storage on the local disk, then in memory), interleaved per round with
## an unchanged re-publish and a loop of `oras push` invocations; reports wall, cpu and ratios.
bench-publish:
	./scripts/compat.sh --install-only
	PATH="$(CURDIR)/.configpub/tools/bin:$$PATH" $(GO) test -run '^$$' -bench '^BenchmarkPublish1000$$' -v \
		-benchtime 1x -timeout 30m ./registry/

## scale: generated repositories of 1,000 and 10,000 targets (SCALE_SIZES=1000,10000,100000 for
## 100k; not part of test), each run through compile, publish, activation, Config Server start-up
## and watchers; prints one table, every figure against an in-run baseline. SCALE_STEPS picks steps
## (for example SCALE_STEPS=compile,server). Each step is one file internal/gen/scale/row_<step>.go.
SCALE_SIZES ?= 1000,10000
SCALE_STEPS ?=
scale: ensure-postgres
	$(GO) run ./internal/gen/scale -sizes $(SCALE_SIZES) -steps "$(SCALE_STEPS)"

lint:
	@files=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$files" ]; then echo "gofmt would change:"; echo "$$files"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

## fuzz: every fuzz target (fuzz-smoke's, then the others) for a short fixed budget
## (scripts/fuzz.sh: one retry of the Go fuzzing coordinator's deadline race, never of a
## failing input). The console's targets read a real PostgreSQL history (a private
## cluster, as the tests start).
## fuzz-smoke: the targets fuzzed longest, for CI. Every target's corpus (seeds and the
## inputs that once failed) is replayed by `make test`; a target new to fuzzing still finds
## new inputs in seconds, which belongs in `make fuzz` (or a nightly job), not in the check
## that decides whether a change lands.
FUZZTIME ?= 15s
fuzz-smoke:
	GO=$(GO) bash scripts/fuzz.sh ./internal/yamlstrict FuzzParse $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./internal/render FuzzCanonical $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./compiler FuzzCompileSource $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./internal/render FuzzMarshalMatchesReference $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./internal/render FuzzDecode $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./internal/secretscan FuzzValue $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./bundle FuzzParseManifest $(FUZZTIME)

fuzz: ensure-postgres fuzz-smoke
	GO=$(GO) bash scripts/fuzz.sh ./compiler FuzzCompileEnvironment $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./internal/controltoken FuzzVerify $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./bundle FuzzParseRoot $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./bundle FuzzParseDeliveryManifest $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./bundle FuzzFreezeWindow $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver/auth FuzzParseKeys $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver/auth FuzzVerifyToken $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver/auth FuzzVerifyClaims $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver FuzzQueryParameters $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver FuzzEvidenceBody $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver FuzzIfNoneMatch $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver FuzzHeldSequence $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver/client FuzzApplyOCI $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver/client FuzzDigestHeaders $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./configserver/client FuzzManifestHeaders $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./readback FuzzReadStatus $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./console FuzzConsoleQuery $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./console FuzzTargetSearch $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh ./webhook FuzzReceiverURL $(FUZZTIME)

clean:
	rm -rf bin .configpub dist

## e2e: build the binary and drive the whole scenario through it; the operator console is
## driven in headless Chromium (screenshots under $CONFIGPUB_E2E_ARTIFACTS or a printed temp dir),
## and the console's pages over generated histories too (console/browser_test.go).
e2e: ensure-postgres ensure-chromium
	CONFIGPUB_TOOLS_BIN=$(CURDIR)/.configpub/tools/bin $(GO) test -tags e2e -count=1 -timeout 30m -v ./e2e/
	$(GO) test -tags e2e -count=1 -timeout 10m -run Browser ./console/
