# The two commands a person needs: `make run` (the whole system on this
# machine, on private Redis/PostgreSQL/Kafka) and `make test`.
#
#   make deps    install what running needs and a fresh Debian machine
#                lacks (redis-server, postgresql), only what is missing
#   make test-deps  deps plus what only the tests need (chromium,
#                prometheus for promtool, maven and java for Apache Kafka,
#                helm in bin/ from the Go module proxy, bin/jaeger: the
#                trace store, built from the Go module proxy, stripe-mock
#                and mailpit into bin/, axe-core from npm for the
#                accessibility test)
#   make build   bin/seckill, stamped with the commit git names (for
#                `seckill version`), and the load tool bin/loadtest
#                (deploy/tools/cmd/loadtest); make build-seckill: bin/seckill alone
#   make run     deps + build, then `bin/seckill dev`
#   make test    test-deps, go vet, every test, then a short fuzz pass; each
#                package's result as it ends, and the slow packages' tests
#                (TEST_PROGRESS) as they end (go test -json | deploy/tools/testfmt)
#   make fuzz    only the fuzz pass (FUZZTIME per target, default 3000x:
#                3000 inputs each)
#   make lint    gofmt check (lists the files), go mod tidy, go vet,
#                staticcheck, govulncheck (called vulnerabilities, offline
#                database), the import layers (deploy/tools/depcheck), and
#                the Helm chart: helm lint and template, the rendered objects
#                checked against the Kubernetes API's types and the restricted
#                Pod Security Standard (deploy/tools/helmcheck)
#   make vulncheck  only lint's govulncheck, over both modules
#   make test-race  the race detector over the packages where goroutines
#                share state (RACE_PKGS), bounded by RACE_TIMEOUT
#   make bench   the Go benchmarks, then a standard flash sale against
#                `bin/seckill dev` beside this machine's two ceilings, then
#                the accepted path on the in-process broker and on 1 and 3
#                Apache Kafka nodes (deploy/tools/cmd/bench; about six minutes)
#   make chaos   the fault suite in full: a crowd of 4,000 shoppers per
#                fault while PostgreSQL, Redis, the broker, a worker, a
#                gateway and the whole process fail one at a time, then the
#                checks and the table (deploy/tools/chaos; about six
#                minutes).
#                `make test` runs the same suite with a small crowd.
#   make fleet   the system as a fleet of separate processes (3 gateways, 2
#                workers, 2 sweepers, Apache Kafka as 3 nodes, PostgreSQL,
#                a Redis Cluster of 3 masters): a crowd
#                of 6,000 shoppers spread over the gateways while one gateway
#                and one worker are killed -9, then every check (deploy/tools/chaos
#                TestFleet; a few minutes). `make test` runs it with 240.
#   make netlab  faults only a network makes: the fleet with every process
#                and service on a host of its own (network namespaces joined
#                by a switch of 0.2-0.5 ms links; root), a crowd of 3,000
#                per fault while a gateway is cut off from Redis, the
#                gateways reach Redis over 40 ms and 1 % loss, a worker is
#                cut off from PostgreSQL, a Redis master is failed over
#                behind a partition, a Kafka leader is cut off from its
#                followers; every check (deploy/tools/netlab; about a quarter of
#                an hour). `make test` runs the first with 200 shoppers.
#   make crowd   the real crowd against `bin/seckill dev` (SECKILL_GLOBAL_RATE
#                =2000): catalog beside /healthz, PostgreSQL transactions,
#                sockets and push delay, 100 shoppers under a bot (about a minute)
#   make capacity the same crowd on one redis-server, on a 3-master Redis
#                Cluster, and there with a voucher of 8 shards, each on a
#                fleet of processes, in rounds: reservations/s, p99, CPU per
#                reservation of each process, extrapolated needs (deploy/tools/cmd/bench
#                -shapes; a few minutes)
#   make conformance  Schemathesis (an API fuzzer, in a virtual environment
#                under bin/) against `bin/seckill dev` from gateway/openapi.yaml:
#                every operation, generated inputs, sequences through the
#                links; zero failures (gateway/CONTRACT.md; CONFORMANCE_FLAGS
#                go to `st run`, e.g. "-n 50")
#   make clean   remove bin/ and .run/ (dev-mode data)
#
# The repository holds two Go modules: the product (go.mod at the top) and
# the tools that drive it from outside (deploy/tools/go.mod: the load tool,
# the bench, the fault suite, the network lab, the fleet, the system tests,
# the generated client, the layering test), so that the product's go.mod
# lists none of the tools' dependencies. Each target runs over both.
#
# PKGS narrows vet/test/fuzz/bench in the product module and TOOLS_PKGS in
# the tools module (relative to deploy/tools), e.g. `make test
# PKGS=./orders/...` (TOOLS_PKGS is then empty unless given too).
#
# vet and test run both modules in one go command, in a Go workspace of the
# two that make writes under bin/ (WORK) and never checks in: one scheduler
# then overlaps the long system tests with the product's packages instead
# of running them after. Builds (make build, deploy/Dockerfile) use the
# product's go.mod alone.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
# GOTOOLCHAIN=auto makes every go command here build with the toolchain
# named by the `toolchain` line of go.mod and deploy/tools/go.mod (keep the
# two alike) when it is newer than the installed Go, which the go command
# then fetches once through the Go module proxy (golang.org/toolchain, about
# 70 MB, into the module cache). The installed Go's own go.env may say
# GOTOOLCHAIN=local, which would ignore that line; a GOTOOLCHAIN set in the
# environment still wins. The line names a release in which this code calls
# no known vulnerability of the standard library (govulncheck in lint checks
# it too): go1.26.8, the go line, has eight such, fixed in go1.26.9 and
# go1.26.10; go1.26.11 is the newest go1.26.
export GOTOOLCHAIN ?= auto
PKGS ?= ./...
TOOLS := deploy/tools
TOOLS_PKGS ?= $(if $(filter ./...,$(PKGS)),./...,)
# TOOLS_GO runs the go command in the tools module.
TOOLS_GO := $(GO) -C $(TOOLS)
WORK := bin/go.work
# WORK_GO runs the go command over both modules; WORK_PKGS are PKGS and
# TOOLS_PKGS as the workspace names them, the longest packages first (the
# go command starts them in the order given), so that they start at once.
WORK_GO := GOWORK=$(CURDIR)/$(WORK) $(GO)
SLOWEST_PKGS := $(if $(TOOLS_PKGS),./$(TOOLS)/systemtest ./$(TOOLS)/chaos) $(if $(filter ./...,$(PKGS)),./orders/kafkaq)
WORK_PKGS := $(SLOWEST_PKGS) $(PKGS) $(addprefix ./$(TOOLS)/,$(patsubst ./%,%,$(TOOLS_PKGS)))
BIN := bin/seckill
# DRAND is the drand binary of the private randomness beacon that dev mode
# and the tests run for the draws (deploy/devstack, StartDrand), built once
# from the Go module proxy with the conn_insecure tag (loopback has no TLS)
# and kept here, where devstack looks for it first.
DRAND_VERSION := v2.1.8
DRAND := bin/drand
LOADTEST := bin/loadtest
# FUZZTIME is a count of inputs (3000x), not a duration: Go 1.26's fuzz
# coordinator can fail a run bounded by time with "context deadline
# exceeded" when a busy machine starves its workers at the deadline, with no
# input at fault. 3000 inputs take the slowest target a few seconds.
FUZZTIME ?= 3000x
BENCHTIME ?= 1s
# BENCH_FLAGS go to deploy/tools/cmd/bench, e.g. BENCH_FLAGS="-profile /tmp/prof"
# (CPU profiles of the gateway under each crowd) or "-accepted 50000".
BENCH_FLAGS ?=
# BENCH_OUT is where make bench writes its cost table as JSON; BENCH_COMPARE
# a saved one to compare with (cp .run/bench.json .run/bench-before.json,
# change something, make bench BENCH_COMPARE=.run/bench-before.json).
BENCH_OUT ?= .run/bench.json
BENCH_COMPARE ?=
# CROWD_FLAGS go to `loadtest crowd`, e.g. CROWD_FLAGS="-sockets 2000 -bots 3".
CROWD_FLAGS ?=
# CAPACITY_FLAGS go to deploy/tools/cmd/bench -shapes, e.g. "-shape-shoppers 40000 -rounds 5".
CAPACITY_FLAGS ?=
# staticcheck comes through the Go module proxy at this pinned version, so
# every machine lints with the same rules and nothing is installed by hand.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# govulncheck comes the same way, and so does the vulnerability database it
# reads, so that lint needs no network but the module proxy (not
# vuln.go.dev): the Go vulnerability database's own repository,
# golang.org/x/vulndb, is a Go module whose data/osv folder holds every
# published entry as OSV JSON, one GO-YYYY-NNNN.json a vulnerability, and
# govulncheck -db file://FOLDER reads such a folder without an index (it
# builds one in memory; a behaviour of the pinned govulncheck, which fails
# loudly, "unrecognized vulndb format", if a newer one drops it). VULNDB
# pins that module at one commit: the database as of 2026-11-05 23:49:57
# UTC, the time in its pseudo-version (govulncheck -show version says
# "DB updated: 0001-01-01": data/osv leaves the entries' modified dates to
# the publishing step). To refresh it, run
#   go list -m golang.org/x/vulndb@latest
# and put the version it prints here; the lint line prints the date.
# govulncheck exits 3, failing lint, when the code of either module calls a
# vulnerable function, of a dependency or of the standard library of the
# toolchain make builds with (GOTOOLCHAIN above); a vulnerability only in a
# package the code imports, or a module it requires, without a call to it,
# does not fail it (govulncheck counts those in its last lines, and
# `-show verbose` lists them).
GOVULNCHECK ?= golang.org/x/vuln/cmd/govulncheck@v1.10.0
# helm renders and lints the Kubernetes chart (deploy/helm/seckill); it comes
# through the Go module proxy at this pinned version, built once into
# bin/helm (about five minutes on a busy machine, then cached) by `make
# test-deps` and `make lint`. deploy/tools/helmcheck reads the version here.
HELM ?= helm.sh/helm/v4/cmd/helm@v4.3.2
HELM_BIN := bin/helm
CHART := deploy/helm/seckill
VULNDB ?= golang.org/x/vulndb@v0.0.0-20261105234957-e22db6528018
# RACE_PKGS are the packages whose tests run goroutines against shared state:
# the gates and the WebSocket (gateway), the hub (notify), the workers, the
# sweeper and the reconciler (orders), the stock, the order ids and the
# catalog (seckill). Left out: cmd/seckill, whose end-to-end tests take
# minutes already and under the race detector's 5-10x would take most of
# CI's time while exercising the same packages again; and gateway/auth,
# whose tests share nothing between goroutines and spend their time in
# bcrypt (157 s under -race on a busy machine); its token cache is raced
# through gateway's HTTP tests.
RACE_PKGS ?= ./gateway ./gateway/edge ./notify/... ./orders/... ./seckill/...
RACE_TIMEOUT ?= 10m

.PHONY: drand deps test-deps ts-client webcheck helm jaeger stripe-mock mailpit kafka-jars build build-seckill run test vet lint vulncheck test-race fuzz bench chaos fleet netlab crowd capacity conformance clean

# deps installs only what running needs and is missing (redis-server,
# postgresql); test-deps adds what only the tests need (chromium for the
# browser tests, with a Chinese font so screenshots of the page in Chinese
# show its characters, prometheus for promtool, which tests the alert rules,
# openssl for the merchant's entry-token example of seckill/eligibility). Both
# use apt-get (as root, or through sudo); without either they print the exact
# command to run and stop. Before installing postgresql they tell Debian not
# to create and start the system-wide cluster on port 5432: the project runs
# its own private ones. Debian's prometheus package would start a Prometheus
# server on port 9090 (and enable it at boot): only promtool is wanted, so the
# install runs under a policy-rc.d that forbids starting services, and the
# unit is disabled. SECKILL_APT_UPDATED=1 skips `apt-get update` (.ci/run has
# just done it).
#
# maven and default-jre-headless run Apache Kafka (deploy/devstack's
# StartApacheKafka: Maven fetches the broker's jars once, Java runs it). The
# tests always need them; `make run` only with SECKILL_DEV_KAFKA=apache, its
# default being the in-process broker, so deps installs them only then and a
# machine that never runs real Kafka is spared some 200 MB.
KAFKA_DEPS := maven default-jre-headless
RUN_DEPS := redis-server postgresql $(if $(filter apache,$(SECKILL_DEV_KAFKA)),$(KAFKA_DEPS))
TEST_DEPS := redis-server postgresql $(KAFKA_DEPS) chromium fonts-wqy-microhei prometheus iproute2 jq curl openssl nodejs npm

deps: $(DRAND) $(if $(filter jaeger,$(SECKILL_DEV_TRACING)),jaeger) $(if $(filter stripe-mock,$(SECKILL_DEV_PAYMENTS)),stripe-mock) $(if $(filter mailpit,$(SECKILL_DEV_MAIL)),mailpit)
	@$(call install_deps,$(RUN_DEPS))

test-deps: $(DRAND) helm jaeger stripe-mock mailpit
	@$(call install_deps,$(TEST_DEPS))
	@$(MAKE) --no-print-directory ts-client
	@$(MAKE) --no-print-directory webcheck

# ts-client installs the TypeScript client's pinned packages (openapi-typescript,
# openapi-fetch, typescript: deploy/clients/typescript/package-lock.json) from
# npm, again whenever the lock file changes.
TS_CLIENT := deploy/clients/typescript
ts-client:
	@if [ ! -f $(TS_CLIENT)/node_modules/.package-lock.json ] || [ $(TS_CLIENT)/package-lock.json -nt $(TS_CLIENT)/node_modules/.package-lock.json ]; then \
		echo "ts-client: npm ci in $(TS_CLIENT)"; npm ci --prefix $(TS_CLIENT) --no-audit --no-fund; \
	else echo "ts-client: $(TS_CLIENT)/node_modules is current"; fi

# webcheck installs the accessibility engine the browser tests inject into
# the pages (axe-core, pinned in deploy/tools/webcheck/package-lock.json)
# from npm, again whenever the lock file changes.
WEBCHECK := deploy/tools/webcheck
webcheck:
	@if [ ! -f $(WEBCHECK)/node_modules/.package-lock.json ] || [ $(WEBCHECK)/package-lock.json -nt $(WEBCHECK)/node_modules/.package-lock.json ]; then \
		echo "webcheck: npm ci in $(WEBCHECK)"; npm ci --prefix $(WEBCHECK) --no-audit --no-fund; \
	else echo "webcheck: $(WEBCHECK)/node_modules is current"; fi

# helm builds bin/helm at the version HELM pins, when it is missing or
# another version (the module version the go command recorded in it: helm
# built so says only "v4.3" of itself).
helm:
	@want=$(lastword $(subst @, ,$(HELM))); \
	if [ "$$($(GO) version -m $(HELM_BIN) 2>/dev/null | awk '$$1 == "mod" { print $$3 }')" != "$$want" ]; then \
		echo "helm: go install $(HELM) into bin/"; mkdir -p bin; \
		GOBIN=$(CURDIR)/bin GOWORK=off $(GO) -C / install $(HELM); \
	fi

# jaeger builds bin/jaeger, the trace store the tests (deploy/devstack's
# StartJaeger) and `make run SECKILL_DEV_TRACING=jaeger` start as a child
# process: Jaeger v1.75's cmd/jaeger from the Go module proxy, as a tool of
# a module of its own (deploy/tools/jaeger), since its dependencies are
# older than the product's (its Prometheus client among them: in the tools
# module the product's newer one breaks its build). About two minutes the
# first time, nothing after.
JAEGER_BIN := bin/jaeger
jaeger: $(JAEGER_BIN)
$(JAEGER_BIN): $(TOOLS)/jaeger/go.mod $(TOOLS)/jaeger/go.sum
	$(GO) -C $(TOOLS)/jaeger build -o $(CURDIR)/$(JAEGER_BIN) github.com/jaegertracing/jaeger/cmd/jaeger

# stripe-mock is Stripe's mock server (a Go program, through the Go module
# proxy), installed into bin/ where deploy/devstack finds it: the payment
# tests start one per package, and `make run` with
# SECKILL_DEV_PAYMENTS=stripe-mock takes payments through Stripe against one.
# Keep the version in step with devstack.StripeMockModule.
STRIPE_MOCK ?= github.com/stripe/stripe-mock@v0.203.0
stripe-mock:
	@if [ ! -x bin/stripe-mock ]; then echo "deps: go install $(STRIPE_MOCK) into bin/"; \
		GOBIN=$(CURDIR)/bin $(GO) install $(STRIPE_MOCK); fi

# mailpit is a mail catcher (a real SMTP server with an HTTP API, a Go
# program through the Go module proxy), installed into bin/ where
# deploy/devstack finds it: the reminder tests read the e-mail it got, and
# `make run` with SECKILL_DEV_MAIL=mailpit sends the reminders to one.
# Keep the version in step with devstack.MailpitModule.
MAILPIT ?= github.com/axllent/mailpit@v1.33.1
mailpit:
	@if [ ! -x bin/mailpit ]; then echo "deps: go install $(MAILPIT) into bin/"; \
		GOBIN=$(CURDIR)/bin $(GO) install $(MAILPIT); fi

drand: $(DRAND)

$(DRAND):
	@mkdir -p $(dir $@)
	GOBIN=$(abspath $(dir $@)) $(GO) install -tags conn_insecure github.com/drand/drand/v2/cmd/drand@$(DRAND_VERSION)

define install_deps
	want=" $(1) "; missing=(); \
	has() { [[ "$$want" == *" $$1 "* ]]; }; \
	if has redis-server; then command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server); fi; \
	if has postgresql; then compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || { command -v postgres && command -v initdb; } >/dev/null 2>&1 || missing+=(postgresql); fi; \
	if has chromium; then command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || missing+=(chromium); fi; \
	if has fonts-wqy-microhei; then fc-list :lang=zh-cn 2>/dev/null | grep -q . || missing+=(fonts-wqy-microhei); fi; \
	if has prometheus; then command -v promtool >/dev/null 2>&1 || missing+=(prometheus); fi; \
	if has iproute2; then command -v ip >/dev/null 2>&1 || missing+=(iproute2); fi; \
	for tool in jq curl openssl; do if has $$tool; then command -v $$tool >/dev/null 2>&1 || missing+=($$tool); fi; done; \
	if has nodejs; then command -v node >/dev/null 2>&1 || missing+=(nodejs); fi; \
	if has npm; then command -v npm >/dev/null 2>&1 || missing+=(npm); fi; \
	if has maven; then command -v mvn >/dev/null 2>&1 || missing+=(maven); fi; \
	if has default-jre-headless; then command -v java >/dev/null 2>&1 || [ -x /usr/lib/jvm/default-java/bin/java ] || missing+=(default-jre-headless); fi; \
	if [ $${#missing[@]} -eq 0 ]; then echo "deps: $(strip $(1)) installed"; exit 0; fi; \
	echo "deps: missing: $${missing[*]}"; \
	if ! command -v apt-get >/dev/null 2>&1; then \
		echo "deps: no apt-get on this machine: install $${missing[*]} with its package manager, then run make again" >&2; exit 1; \
	fi; \
	if [ "$$(id -u)" -eq 0 ]; then as_root=(env DEBIAN_FRONTEND=noninteractive); \
	elif command -v sudo >/dev/null 2>&1; then as_root=(sudo env DEBIAN_FRONTEND=noninteractive); \
	else \
		echo "deps: not root and no sudo. As root, run:" >&2; \
		echo "    apt-get update && apt-get install -y $${missing[*]}" >&2; \
		echo "then run make again." >&2; exit 1; \
	fi; \
	if [[ " $${missing[*]} " == *" postgresql "* ]]; then \
		"$${as_root[@]}" mkdir -p /etc/postgresql-common/createcluster.d; \
		echo "create_main_cluster = false" | "$${as_root[@]}" tee /etc/postgresql-common/createcluster.d/seckill-no-main-cluster.conf >/dev/null; \
	fi; \
	if [ -z "$${SECKILL_APT_UPDATED:-}" ]; then echo "deps: apt-get update"; "$${as_root[@]}" apt-get update; fi; \
	others=(); for p in "$${missing[@]}"; do [ "$$p" = prometheus ] || others+=("$$p"); done; \
	if [ $${#others[@]} -gt 0 ]; then \
		echo "deps: apt-get install -y $${others[*]}"; \
		"$${as_root[@]}" apt-get install -y "$${others[@]}" || { \
			echo "deps: installing failed. As root, run: apt-get update && apt-get install -y $${others[*]}" >&2; exit 1; }; \
	fi; \
	if [[ " $${missing[*]} " == *" prometheus "* ]]; then \
		echo "deps: apt-get install -y --no-install-recommends prometheus (for promtool; about 330 MB; its server is not started)"; \
		policy=; if [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\n# seckill make test-deps: no service starts while prometheus installs\nexit 101\n' | "$${as_root[@]}" tee /usr/sbin/policy-rc.d >/dev/null; \
			"$${as_root[@]}" chmod 755 /usr/sbin/policy-rc.d; policy=1; fi; \
		status=0; "$${as_root[@]}" apt-get install -y --no-install-recommends prometheus || status=$$?; \
		if [ -n "$$policy" ]; then "$${as_root[@]}" rm -f /usr/sbin/policy-rc.d; fi; \
		if [ $$status -ne 0 ]; then echo "deps: installing failed. As root, run: apt-get update && apt-get install -y --no-install-recommends prometheus" >&2; exit 1; fi; \
		if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then "$${as_root[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true; \
		elif command -v service >/dev/null 2>&1; then "$${as_root[@]}" service prometheus stop >/dev/null 2>&1 || true; fi; \
	fi
endef

# COMMIT is the commit `seckill version` names, read from git by the build
# itself: the Go toolchain stamps none where GOFLAGS has -buildvcs=false (as
# on the project's machines) nor in a git worktree. "-dirty" follows it when
# tracked files differ from it. Without git, or outside a checkout, it is
# empty, the build goes on, and the binary says the commit is unknown.
# Deferred (=), so that only a build asks git.
GIT ?= git
COMMIT_HASH = $(shell $(GIT) rev-parse --short HEAD 2>/dev/null)
COMMIT = $(if $(COMMIT_HASH),$(COMMIT_HASH)$(if $(shell $(GIT) status --porcelain --untracked-files=no 2>/dev/null),-dirty))

build: build-seckill
	$(TOOLS_GO) build -o $(abspath $(LOADTEST)) ./cmd/loadtest

build-seckill:
	$(GO) build -ldflags "-X main.commit=$(COMMIT)" -o $(BIN) ./cmd/seckill

run: deps build
	./$(BIN) dev

vet: $(WORK)
	$(WORK_GO) vet $(PKGS) $(addprefix ./$(TOOLS)/,$(patsubst ./%,%,$(TOOLS_PKGS)))

# $(WORK) is the workspace of the two modules (see WORK_GO), with go.mod's
# go and toolchain lines: a workspace's own lines are the ones that count.
$(WORK): go.mod $(TOOLS)/go.mod
	@mkdir -p $(dir $@)
	@printf 'go %s\n\ntoolchain %s\n\nuse (\n\t..\n\t../$(TOOLS)\n)\n' "$$(sed -n 's/^go //p' go.mod)" "$$(sed -n 's/^toolchain //p' go.mod)" > $@

# lint fails on any file gofmt would change (and names them), on a go.mod or
# go.sum that `go mod tidy` would change (so the product's go.mod lists only
# what the product and its tests use, none of the tools'), on go vet's
# findings, on staticcheck's, on a known vulnerability the code calls
# (govulncheck, with the database VULNDB), and on an import against the layers of
# deploy/tools/depcheck (a lower folder importing a higher one, a test
# helper outside tests or linked into a binary, dev mode linked into the
# production build); the production build's own file
# (cmd/seckill/app/nodev.go) is vetted with its tag.
lint: $(WORK) helm
	@unformatted=$$(git ls-files -z -- '*.go' | xargs -0 gofmt -l); \
	if [ -n "$$unformatted" ]; then echo "lint: gofmt would change these files (run gofmt -w on them):" >&2; echo "$$unformatted" >&2; exit 1; fi; \
	echo "lint: gofmt: every file is formatted"
	$(GO) mod tidy -diff
	$(TOOLS_GO) mod tidy -diff
	@$(MAKE) --no-print-directory vet PKGS=./... TOOLS_PKGS=./...
	$(GO) vet -tags nodev ./cmd/seckill/...
	$(WORK_GO) run $(STATICCHECK) ./... ./$(TOOLS)/...
	@$(MAKE) --no-print-directory vulncheck
	$(TOOLS_GO) test -count=1 ./depcheck
	$(HELM_BIN) lint --strict $(CHART)
	$(HELM_BIN) lint --strict $(CHART) --values $(TOOLS)/helmcheck/testdata/everything.yaml
	$(HELM_BIN) template seckill $(CHART) --values $(TOOLS)/helmcheck/testdata/everything.yaml >/dev/null
	$(TOOLS_GO) test -count=1 ./helmcheck
	@$(MAKE) --no-print-directory ts-client
	$(TS_CLIENT)/node_modules/.bin/tsc -p $(TS_CLIENT)/tsconfig.json
	$(TS_CLIENT)/node_modules/.bin/tsc -p web/tsconfig.json

# vulncheck is lint's govulncheck over both modules, against the database
# VULNDB fetched through the module proxy (see GOVULNCHECK above).
vulncheck:
	@osv=$$($(GO) -C / mod download -json $(VULNDB) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')/data/osv; \
	if [ ! -d "$$osv" ]; then echo "vulncheck: $(VULNDB) has no data/osv folder" >&2; exit 1; fi; \
	echo "vulncheck: $$($(GO) version | cut -d' ' -f3), database $(VULNDB) (as of $$(echo '$(VULNDB)' | sed 's/.*-\([0-9]\{4\}\)\([0-9]\{2\}\)\([0-9]\{2\}\)[0-9]\{6\}-.*/\1-\2-\3/'))"; \
	set -x; $(GO) run $(GOVULNCHECK) -db "file://$$osv" ./...; $(TOOLS_GO) run $(GOVULNCHECK) -db "file://$$osv" ./...

test-race: deps
	$(GO) test -race -count=1 -timeout $(RACE_TIMEOUT) $(RACE_PKGS)

# TEST_PROGRESS are the packages whose tests make test prints as each ends:
# the end-to-end ones, which take minutes (deploy/tools/testfmt prints
# everything else as go test would, a package's line when it ends).
TEST_PROGRESS ?= systemtest,chaos,netlab

test: test-deps vet kafka-jars
	$(TOOLS_GO) build -o $(CURDIR)/bin/testfmt ./testfmt
	$(WORK_GO) test -json -count=1 -timeout 12m $(WORK_PKGS) | bin/testfmt -progress $(TEST_PROGRESS)
	@$(MAKE) --no-print-directory fuzz

# kafka-jars fetches Apache Kafka's broker jars with Maven into the cache
# folder the tests start brokers from (~/.cache/seckill/kafka-<version>-*;
# once per machine, about 45 jars, 43 MB), so no test spends its time on
# the download. A program that finds no cache fetches by itself all the same.
kafka-jars:
	@$(GO) run ./deploy/devstack/kafkajars >/dev/null

# fuzz runs every Fuzz target in the tree for FUZZTIME, one at a time (go
# test fuzzes one target of one package per run). The targets are read from
# the packages' test files, not listed with `go test -list`: that runs every
# package's test binary, and the end-to-end packages' TestMain starts their
# services (Apache Kafka among them) only to list names, which took most of
# the pass's two and a half minutes.
fuzz:
	@targets=$$($(GO) list -f '{{.ImportPath}} {{.Dir}}' $(PKGS) | while read -r pkg dir; do \
		sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$dir"/*_test.go 2>/dev/null | sed "s|^|$$pkg |" || true; \
	done); \
	if [ -z "$$targets" ]; then echo "fuzz: no Fuzz targets"; exit 0; fi; \
	while read -r pkg name; do \
		echo "fuzz: $$pkg $$name for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
	done <<< "$$targets"

# bench runs the Go benchmarks of the packages (of PKGS) that have any, so
# that no other package's test binary is built or its services started; then
# deploy/tools/cmd/bench: `bin/seckill dev` on private services, the load tool's
# accepted and sold-out runs, redis-benchmark's EVALSHA rate of reserve.lua and
# the rate of GET /healthz, and the table of each figure beside its ceiling;
# then the cost table (what one accepted buy and one sold-out answer cost
# each service), also written as JSON to BENCH_OUT. BENCH_COMPARE names a
# saved one (e.g. a copy of an earlier BENCH_OUT): the table shows the change.
bench: deps build
	@benched() { $(GO) -C "$$1" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' $${@:2} | \
		while read -r dir; do if grep -q '^func Benchmark' "$$dir"/*_test.go 2>/dev/null; then echo "$$dir"; fi; done; }; \
	pkgs=$$(benched . $(PKGS)); \
	if [ -n "$$pkgs" ]; then $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) $$pkgs; fi; \
	if [ -n "$(TOOLS_PKGS)" ]; then pkgs=$$(benched $(TOOLS) $(TOOLS_PKGS)); \
		if [ -n "$$pkgs" ]; then $(TOOLS_GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) $$pkgs; fi; fi
	@mkdir -p $(dir $(BENCH_OUT))
	$(TOOLS_GO) run ./cmd/bench -bin $(CURDIR)/$(BIN) -loadtest $(CURDIR)/$(LOADTEST) -out $(abspath $(BENCH_OUT)) $(if $(BENCH_COMPARE),-compare $(abspath $(BENCH_COMPARE))) $(BENCH_FLAGS)

# chaos runs deploy/tools/chaos's TestFaults in its full form against bin/seckill
# and prints the table (also kept in .run/chaos.md), then TestFaultsApacheKafka
# (the served system on a 3-node Apache Kafka cluster; .run/chaos.apache.md).
# CHAOS_FAULTS picks faults by name, comma separated (see chaos.Faults and
# chaos.ApacheFaults in deploy/tools/chaos).
CHAOS_FAULTS ?=
chaos: deps build
	@mkdir -p .run; rm -f .run/chaos.md; status=0; \
	SECKILL_CHAOS=full SECKILL_CHAOS_BIN=$(CURDIR)/$(BIN) SECKILL_CHAOS_TABLE=$(CURDIR)/.run/chaos.md \
		SECKILL_CHAOS_FAULTS="$(CHAOS_FAULTS)" $(GO) -C $(TOOLS) test -count=1 -v -timeout 60m -run '^(TestFaults|TestFaultsApacheKafka)$$' ./chaos || status=$$?; \
	for t in .run/chaos.md .run/chaos.apache.md; do if [ -f $$t ]; then echo; cat $$t; fi; done; exit $$status

# fleet runs deploy/tools/chaos's TestFleet in its full form against bin/seckill
# and prints the table (also kept in .run/fleet.md).
fleet: deps build
	@mkdir -p .run; rm -f .run/fleet.md; status=0; \
	SECKILL_FLEET=full SECKILL_CHAOS_BIN=$(CURDIR)/$(BIN) SECKILL_FLEET_TABLE=$(CURDIR)/.run/fleet.md \
		$(GO) -C $(TOOLS) test -count=1 -v -timeout 20m -run '^TestFleet$$' ./chaos || status=$$?; \
	if [ -f .run/fleet.md ]; then echo; cat .run/fleet.md; fi; exit $$status

# crowd starts `bin/seckill dev` on private services with the fairness
# scenario's limits and runs `loadtest crowd` against it
# (deploy/tools/cmd/bench -crowd); the table says each figure, its target and verdict.
crowd: deps build
	$(TOOLS_GO) run ./cmd/bench -crowd -bin $(CURDIR)/$(BIN) -loadtest $(CURDIR)/$(LOADTEST) -crowd-args "$(CROWD_FLAGS)"

# netlab runs deploy/tools/netlab's TestNetFaults in its full form against
# bin/seckill (as root: it makes network namespaces) and prints the table
# (also kept in .run/netlab.md). NETLAB_FAULTS picks faults by name, comma
# separated (see netlab.Faults in deploy/tools/netlab).
netlab: deps build
	@$(call install_deps,iproute2 $(KAFKA_DEPS))
	@$(GO) run ./deploy/devstack/kafkajars >/dev/null
	@mkdir -p .run; rm -f .run/netlab.md; status=0; \
	SECKILL_NETLAB=full SECKILL_CHAOS_BIN=$(CURDIR)/$(BIN) SECKILL_NETLAB_TABLE=$(CURDIR)/.run/netlab.md \
		SECKILL_CHAOS_FAULTS="$(NETLAB_FAULTS)" $(GO) -C $(TOOLS) test -count=1 -v -timeout 30m -run '^TestNetFaults$$' ./netlab || status=$$?; \
	if [ -f .run/netlab.md ]; then echo; cat .run/netlab.md; fi; exit $$status

# capacity compares Redis shapes with the same crowd on fleets of processes:
# one redis-server, a 3-master Redis Cluster, and that cluster with a voucher
# of 8 shards (deploy/tools/cmd/bench -shapes); table also in .run/capacity.md.
capacity: deps build
	@mkdir -p .run; set -o pipefail; $(TOOLS_GO) run ./cmd/bench -shapes -bin $(CURDIR)/$(BIN) -loadtest $(CURDIR)/$(LOADTEST) $(CAPACITY_FLAGS) | tee .run/capacity.md
	@uptime | tee -a .run/capacity.md

# conformance installs Schemathesis (deploy/tools/conformance/requirements.txt)
# into a virtual environment under bin/ once, then runs deploy/tools/conformance/run.
# PYTHON is the first of python3.13, python3.12, python3 that runs. Under
# Python 3.11, parallel workers (--workers 2) can trip CPython's "AST
# constructor recursion depth mismatch", so the default runs one worker.
CONFORMANCE_FLAGS ?= -n 30 --workers 1
CONFORMANCE_VENV := bin/conformance-venv
PYTHON ?= $(firstword $(foreach p,python3.13 python3.12 python3,$(shell $(p) -c 'print("$(p)")' 2>/dev/null)))

$(CONFORMANCE_VENV)/.installed: deploy/tools/conformance/requirements.txt
	rm -rf $(CONFORMANCE_VENV)
	$(PYTHON) -m venv $(CONFORMANCE_VENV)
	$(CONFORMANCE_VENV)/bin/pip install --quiet -r deploy/tools/conformance/requirements.txt
	touch $@

conformance: deps build $(CONFORMANCE_VENV)/.installed
	deploy/tools/conformance/run $(BIN) $(CONFORMANCE_VENV) $(CONFORMANCE_FLAGS)

clean:
	rm -rf bin .run
