# agentpay: the commands a developer and CI use. `make run` and `make test`
# are the two a new user needs; both install what they need first.

GO            ?= go
SOLANA_RPC    := chains/devnet/solana-rpc
STDWEBHOOKS   := testdata/standardwebhooks
MCPCLIENT     := testdata/mcpclient
MCPCLIENT2    := testdata/mcpclient2
X402CLIENT    := testdata/x402client
X402V2CLIENT  := testdata/x402v2client
MPPCLIENT     := testdata/mppclient
AXE           := testdata/axe
CONTRACTS     := chains/devnet/contracts
TEST_TIMEOUT  ?= 40m
# FUZZTIME is how long `make fuzz` runs each target: a duration (30s) or a
# number of executions (100000x); FUZZ narrows it to the targets matching
# a regular expression; FUZZFLAGS go to every `go test -fuzz` (-parallel 1
# on a shared machine).
FUZZTIME      ?= 30s
FUZZ          ?= .
FUZZFLAGS     ?=
export CGO_ENABLED ?= 0

.PHONY: run test test-postgres deps generate contracts playground lint bench fuzz screenshots

## run: the whole service on the embedded defaults (SQLite in ./data, five local chains)
run: deps
	$(GO) run ./cmd/agentpay dev

## test: the test suite on SQLite, and on PostgreSQL too when TEST_DATABASE_URL is set
test: deps
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## deps: the node packages: the Solana devnet's (LiteSVM), the official Standard Webhooks library the webhook tests verify deliveries with, the official MCP TypeScript SDKs the MCP server is tested with (1.x for 2025-11-25, the 2.x client for 2026-07-28), the x402 v1 client packages (x402-fetch, x402) and the x402 v2 ones (@x402/fetch, @x402/evm, @x402/core) the x402 endpoints are tested with, the MPP clients (mppx, and @solana/mpp for the solana method) the Payment scheme is tested with, and axe-core, the accessibility checker the browser tests inject into every page
deps: $(SOLANA_RPC)/node_modules/.package-lock.json $(STDWEBHOOKS)/node_modules/.package-lock.json $(MCPCLIENT)/node_modules/.package-lock.json $(MCPCLIENT2)/node_modules/.package-lock.json $(X402CLIENT)/node_modules/.package-lock.json $(X402V2CLIENT)/node_modules/.package-lock.json $(MPPCLIENT)/node_modules/.package-lock.json $(AXE)/node_modules/.package-lock.json

$(SOLANA_RPC)/node_modules/.package-lock.json: $(SOLANA_RPC)/package-lock.json
	cd $(SOLANA_RPC) && npm ci --no-audit --no-fund --loglevel=error

$(STDWEBHOOKS)/node_modules/.package-lock.json: $(STDWEBHOOKS)/package-lock.json
	cd $(STDWEBHOOKS) && npm ci --no-audit --no-fund --loglevel=error

$(MCPCLIENT)/node_modules/.package-lock.json: $(MCPCLIENT)/package-lock.json
	cd $(MCPCLIENT) && npm ci --no-audit --no-fund --loglevel=error
$(MCPCLIENT2)/node_modules/.package-lock.json: $(MCPCLIENT2)/package-lock.json
	cd $(MCPCLIENT2) && npm ci --no-audit --no-fund --loglevel=error

$(X402CLIENT)/node_modules/.package-lock.json: $(X402CLIENT)/package-lock.json
	cd $(X402CLIENT) && npm ci --no-audit --no-fund --loglevel=error

$(X402V2CLIENT)/node_modules/.package-lock.json: $(X402V2CLIENT)/package-lock.json
	cd $(X402V2CLIENT) && npm ci --no-audit --no-fund --loglevel=error

$(MPPCLIENT)/node_modules/.package-lock.json: $(MPPCLIENT)/package-lock.json
	cd $(MPPCLIENT) && npm ci --no-audit --no-fund --loglevel=error

$(AXE)/node_modules/.package-lock.json: $(AXE)/package-lock.json
	cd $(AXE) && npm ci --no-audit --no-fund --loglevel=error

## generate: ent code, entgql schema and gqlgen code from the schema files
generate:
	$(GO) generate ./ent
	$(GO) tool gqlgen generate --config gqlgen.yml

## screenshots: refresh docs/images/ (the PNGs docs/humans.md and docs/dashboard.md show) from the browser tests' screenshots at 390 and 1280 px (-screenshots DIR keeps every one)
SHOTS := $(shell mktemp -d -u /tmp/agentpay-shots.XXXXXX)
screenshots: deps
	$(GO) test -count=1 -run 'TestPagesFitAndPassAxe' ./app -screenshots $(SHOTS)
	$(GO) test -count=1 -run 'TestCheckoutPageStates' ./web -screenshots $(SHOTS)
	mkdir -p docs/images
	cd $(SHOTS) && cp app-home-phone.png app-home-desktop.png app-dashboard-sessions-phone.png app-dashboard-session-desktop.png \
		app-dashboard-confirm-roll-keys-desktop.png confirmed-phone.png confirmed-desktop.png underpaid-phone.png $(CURDIR)/docs/images/
	rm -rf $(SHOTS)

## contracts: rebuild the devnet USDC token's ABI, bytecode and Go bindings with solc from npm
contracts:
	$(CONTRACTS)/build.sh

## playground: copy GraphiQL's browser files into graph/playground/assets/vendor from the versions its package-lock.json pins (committed; only for an upgrade: docs/playground.md)
playground:
	graph/playground/update.sh

## lint: go vet and staticcheck (generated ent code is left to its generator)
lint:
	$(GO) vet ./...
	$(GO) tool staticcheck $$($(GO) list ./... | grep -v '^agentpay/ent')

## bench: the service's measured figures, each against its baseline (docs/testing.md; set TEST_DATABASE_URL for the PostgreSQL figures)
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 20x -timeout 30m ./chains/evm/
	$(GO) test -run '^$$' -bench BenchmarkScan -benchtime 20x -timeout 30m ./chains/solana/
	$(GO) test -run '^$$' -bench 'BenchmarkMeProfile$$|BenchmarkQuickRegister|BenchmarkSendBase' -benchtime 500x -timeout 30m ./rest/
	$(GO) test -run '^$$' -bench BenchmarkCheckoutStatus -benchtime 40000x -timeout 30m ./rest/
	$(GO) test -run '^$$' -bench BenchmarkHotPathsInProcess -benchtime 2000x -timeout 30m ./rest/
	$(GO) test -run '^$$' -bench BenchmarkCreateSession -benchtime 6000x -timeout 30m ./rest/
	$(GO) test -run '^$$' -bench 'BenchmarkX402V2PaidRequest|BenchmarkX402V2SolanaPaidRequest' -benchtime 20x -timeout 30m ./rest/
	$(GO) test -run '^$$' -bench WebhookDeliveries -benchtime 10000x -timeout 30m ./worker/
	$(GO) test -run '^$$' -bench ConfirmedWebhookLatency -benchtime 20x -timeout 30m ./worker/
	$(GO) test -run '^$$' -bench ScanVolume -benchtime 1x -timeout 30m .
	$(GO) test -run '^$$' -bench AgentPayConfirmedLatency -benchtime 10x -timeout 30m ./worker/
	$(GO) test -run '^$$' -bench InternalPayment -benchtime 200x -timeout 30m ./worker/
	$(GO) test -run '^$$' -bench BenchmarkMPPRoundTrip -benchtime 20x -timeout 30m ./rest/
	$(GO) test -run '^$$' -bench WorkerStartToFirstScan -benchtime 5x -timeout 30m ./worker/

## fuzz: every Fuzz target (seeds in each package's testdata/fuzz) for FUZZTIME each; not part of `make test`, which runs the seeds only
fuzz:
	@set -e; grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Fuzz' . | sort | while read -r file; do \
		dir=$$(dirname "$$file"); \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file" | grep -E '$(FUZZ)'); do \
			echo "== $$name ($$dir)"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) "$$dir"; \
		done; \
	done
