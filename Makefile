# lbregistrar — see README.md for the two commands that matter: `make run` and `make test`.

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN := $(CURDIR)/bin

# kube-apiserver, kube-controller-manager, etcd and kubectl for the tests,
# built from source at the versions test/assets/go.mod pins.
export KUBEBUILDER_ASSETS := $(BIN)

CONTROLLER_GEN := $(GO) tool controller-gen
GOLANGCI_LINT := $(GO) tool -modfile=$(CURDIR)/hack/lint/go.mod golangci-lint

# The modules beside the main one: test/assets builds the API server and
# kubectl for the tests; test/manifests reads the Helm chart and the
# monitoring files with Helm's and Prometheus' libraries, which so stay out
# of the main module; hack/lint pins golangci-lint.
MODULES := test/assets test/manifests hack/lint

.PHONY: all
all: build

.PHONY: build
build: ## Build the lbregistrar binary into bin/.
	$(GO) build -buildvcs=auto -o $(BIN)/lbregistrar ./cmd/lbregistrar

IMAGE ?= lbregistrar:dev
# What lbregistrar version prints in the image: the build context has no .git.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo '(devel)')
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_BUILD_ARGS = --build-arg VERSION='$(VERSION)' --build-arg COMMIT='$(COMMIT)'

.PHONY: image
image: ## Build the container image $(IMAGE) with docker or podman, where one runs.
	@engine=$$(for e in docker podman; do command -v $$e >/dev/null && $$e info >/dev/null 2>&1 && echo $$e && break; done); \
	if [ -z "$$engine" ]; then \
		echo "make image: no running container engine (docker or podman) on this machine; the image was not built." >&2; \
		echo "Build it where one runs: docker build $(IMAGE_BUILD_ARGS) -t $(IMAGE) ." >&2; \
		exit 1; \
	fi; \
	echo "$$engine build $(IMAGE_BUILD_ARGS) -t $(IMAGE) ."; $$engine build $(IMAGE_BUILD_ARGS) -t $(IMAGE) .

.PHONY: ociemu
ociemu: ## Build the OCI Load Balancer / NLB API emulator into bin/.
	$(GO) build -o $(BIN)/ociemu ./cmd/ociemu

.PHONY: run
run: build test-assets ## Run everything locally: API server, OCI emulator, lbregistrar, samples (Ctrl-C stops).
	$(GO) run ./cmd/localrun

.PHONY: generate
generate: ## Generate deepcopy functions.
	$(CONTROLLER_GEN) object paths=./api/...

CHART := charts/lbregistrar

.PHONY: manifests
manifests: generate ## Generate the CRD from the API types, and the Helm chart's copies of config/ files.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@# The chart installs the same CRD and alerts; it has copies so that it
	@# is whole on its own (helm package), and verify keeps them current.
	@copy() { { echo "# Copied from $$1 by make manifests; do not edit."; cat "$$1"; } > "$$2"; }; \
	copy config/crd/bases/nodes.peppy-ratio.dev_lbregistrars.yaml $(CHART)/files/crd.yaml && \
	copy config/prometheus/prometheusrule.yaml $(CHART)/files/prometheusrule.yaml

.PHONY: verify
verify: manifests lint ## Fail when generated files, formatting or go.mod are stale, or a doc names what does not exist.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- api config $(CHART) || { echo "generated files are stale: run 'make manifests' and commit"; exit 1; }
	@for m in . $(MODULES); do \
		(cd $$m && $(GO) mod tidy -diff) || { echo "$$m: go.mod or go.sum is not tidy: run 'go mod tidy' there and commit"; exit 1; }; \
	done
	$(GO) vet ./...
	cd test/manifests && $(GO) vet ./...
	@# The docs name only flags, metrics, fields and identifiers that exist.
	$(GO) test -count=1 -run '^TestDocsNameWhatExists$$' ./cmd/lbregistrar

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml) over the project and test/manifests.
	$(GOLANGCI_LINT) run ./...
	cd test/manifests && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...

.PHONY: test-assets
test-assets: ## Build kube-apiserver, kube-controller-manager, etcd and kubectl from source into bin/ (skipped when present).
	@hack/test-assets.sh "$(BIN)"

.PHONY: test
test: verify test-assets ## Run every test, including the real API server ones.
	@# test/manifests has no concurrency of its own, so no -race: that way
	@# the e2e tests build its command from the packages compiled here.
	cd test/manifests && $(GO) test -count=1 -timeout 10m ./...
	$(GO) test -race -count=1 -timeout 30m -skip '^$(HOSTILE)$$' $(LONGEST_FIRST)
	@# The hostile-traffic harness times serve's answers against the shipped
	@# timeouts, so it runs with the machine to itself: no other package's
	@# tests, and no race detector slowing its attackers.
	$(GO) test -count=1 -timeout 10m -run '^$(HOSTILE)$$' ./test/e2e

HOSTILE := TestHostileTraffic

# go test runs packages' tests in the order named, as many at once as
# there are cores: the two longest (each minutes against a real API
# server) start first, beside each other, and the short ones fill in
# behind the first to end, rather than the longest starting last.
LONGEST_FIRST := ./test/e2e ./reconciler ./...

.PHONY: test-times
test-times: test-assets ## Run make test's main step and print where its time goes: packages, the slowest tests (hack/testtimes).
	@$(GO) test -race -count=1 -timeout 30m -skip '^$(HOSTILE)$$' -json $(LONGEST_FIRST) > $(BIN)/test-times.json; status=$$?; \
	$(GO) run ./hack/testtimes < $(BIN)/test-times.json; exit $$status

.PHONY: soak
soak: test-assets ## Run the ownership model-based test over thousands of sequences (CHECKS=N to choose).
	$(GO) test ./reconciler -run '^TestOwnershipModel$$' -count=1 -timeout 6h -rapid.checks=$(or $(CHECKS),3000)

.PHONY: bench
bench: ## Run the benchmarks and rewrite docs/benchmarks.md.
	$(GO) run ./hack/benchdoc -out docs/benchmarks.md

.PHONY: bench-compare
bench-compare: test-assets ## Compare the quick benchmarks with those of git revision BASE (benchstat).
	hack/bench-compare.sh $(BASE)

.PHONY: fuzz
fuzz: ## Run each native fuzz target for a while.
	$(GO) test ./api/v1alpha1 -run '^$$' -fuzz FuzzConvert -fuzztime 60s
	$(GO) test ./webhook -run '^$$' -fuzz FuzzAdmission -fuzztime 60s
	$(GO) test ./webhook -run '^$$' -fuzz FuzzServer -fuzztime 60s
	$(GO) test ./cmd/lbregistrar -run '^$$' -fuzz FuzzManifests -fuzztime 60s
	$(GO) test ./test/ociemu -run '^$$' -fuzz FuzzDropNullMembers -fuzztime 60s

.PHONY: help
help:
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "%-14s %s\n", $$1, $$2}'
