# evac: build, test and demo. `make demo` runs the main job; `make test` runs every test.

CARGO        ?= cargo
WASM_TARGET  := wasm32-wasip1
WASM_PROFILE := release-wasm
# A policy is a directory of policies/ with a metadata.yml (policies/guest is their shared library).
POLICIES     := $(patsubst policies/%/metadata.yml,%,$(wildcard policies/*/metadata.yml))
EVAC         := target/release/evac
DIST         := dist/policies
POLICY_WASM  := $(foreach p,$(POLICIES),$(DIST)/$(p).wasm)

PLAYGROUND   := dist/playground
# The wasm-bindgen the page is built with: the CLI must match the crate's version exactly.
WASM_BINDGEN := 0.2.130

.PHONY: all build host policies playground bench-playground test test-core test-e2e lint fmt demo demo-evictions bench bench-control bench-hold bench-load bench-memory bench-sim mutants fuzz image version clean setup

all: build

## Install what a fresh machine lacks (the wasm target).
setup:
	@for t in $(WASM_TARGET) wasm32-unknown-unknown; do rustup target list --installed 2>/dev/null | grep -qx $$t || rustup target add $$t; done

build: host policies

host:
	$(CARGO) build --release -p evac

# Each policy: build the cdylib for wasm32-wasip1, then embed its metadata.yml (as kwctl annotate does).
policies: setup host
	$(CARGO) build --profile $(WASM_PROFILE) --target $(WASM_TARGET) $(foreach p,$(POLICIES),-p $(p))
	@mkdir -p $(DIST)
	@for p in $(POLICIES); do \
		$(EVAC) annotate --metadata policies/$$p/metadata.yml \
			--output $(DIST)/$$p.wasm target/$(WASM_TARGET)/$(WASM_PROFILE)/$$(echo $$p | tr - _).wasm || exit 1; \
		echo "built $(DIST)/$$p.wasm"; \
	done

## The browser playground: evac-web for wasm32-unknown-unknown, its JavaScript bindings, and the
## page (crates/evac-web/www), into dist/playground/. Serve it with `evac playground`.
# Where the wasm-bindgen CLI of the crate's version is missing, only its `wasm-bindgen` is
# installed, unoptimized and without TLS: it builds in under half the time (about 3 min of CPU
# instead of 7) and binds the same files, in 6 s instead of 1.4.
playground: setup
	@wasm-bindgen --version 2>/dev/null | grep -q " $(WASM_BINDGEN)$$" || \
		$(CARGO) install wasm-bindgen-cli --version $(WASM_BINDGEN) --debug --no-default-features --bin wasm-bindgen
	$(CARGO) build --profile $(WASM_PROFILE) --target wasm32-unknown-unknown -p evac-web
	@mkdir -p $(PLAYGROUND)
	wasm-bindgen --target web --no-typescript --out-dir $(PLAYGROUND) target/wasm32-unknown-unknown/$(WASM_PROFILE)/evac_web.wasm
	cp crates/evac-web/www/* $(PLAYGROUND)/
	@echo "built $(PLAYGROUND)/ ($$(gzip -9c $(PLAYGROUND)/evac_web_bg.wasm | wc -c) bytes of wasm gzipped); serve it with: $(EVAC) playground"

## All tests: the core's table tests, the host's unit tests, the policies' native tests, and the
## end-to-end tests that load the built modules. Release mode reuses `make build`'s artifacts.
# The playground builds evac-core and evac-sim (no http) for wasm32-unknown-unknown too.
test: build playground
	$(CARGO) test --release --workspace

# In the release profile, as `make build` and `make test` build: the build scripts and proc macros
# that clippy needs are then built once for all of them (clippy's own checks do not depend on the
# profile).
lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	$(CARGO) clippy --release --target $(WASM_TARGET) $(foreach p,$(POLICIES),-p $(p)) -- -D warnings
	$(CARGO) clippy --release --target wasm32-unknown-unknown -p evac-core -p evac-sim -p evac-web -- -D warnings

fmt:
	$(CARGO) fmt --all

## The main job: every scenario of examples/scenarios/ on the embedded simulator, with KubeVirt
## alone and with evac (policy server and controller in process), side by side.
demo: build
	$(EVAC) demo

## Example evictions through the pod-eviction policy, as `kubectl drain` would see them.
demo-evictions: build
	@examples/evictions/run.sh $(EVAC) $(DIST)/pod-eviction.wasm

## Criterion benchmarks (numbers go in docs/benchmarks.md).
bench: build
	$(CARGO) bench -p evac --bench evaluation

## Load benchmark of `evac serve` over HTTPS on loopback (needs wrk: apt-get install wrk).
bench-load: build
	bench/load.sh

## Memory of `evac serve` under HTTP/2 streams and large bodies (needs h2load: apt-get install nghttp2-client).
bench-memory: build
	bench/memory.sh

## The browser playground in headless Chromium: time to ready, per verdict, a 100-VM scenario
## (needs chromium and Node 20+).
bench-playground: build playground
	bench/playground.sh

## The simulator's benchmark: 10 of 500 nodes drained with 10,000 VMs (docs/benchmarks.md).
bench-sim: build
	/usr/bin/time -f "%e s wall, %M KB max RSS" $(EVAC) simulate --quiet examples/scenarios/drain-500-nodes.yaml
	/usr/bin/time -f "%e s wall, %M KB max RSS" $(EVAC) simulate --quiet --evac examples/scenarios/drain-500-nodes.yaml

## The hold on a 500-node, 10,000-VM simulated API server, every piece a process: from a hook's
## call to the evacuation asked for, and the hold endpoint's memory and watch traffic.
bench-hold: build
	bench/hold.py $(EVAC)

## evac control's passes on the 500-node, 10,000-VM drain (time per reconcile, in the report).
bench-control: build
	/usr/bin/time -f "%e s wall, %M KB max RSS" $(EVAC) simulate --json --evac examples/scenarios/drain-500-nodes.yaml | grep -A8 '"controller"'

## Mutation testing with cargo-mutants (docs/benchmarks.md): every mutant of evac-core must be
## caught by the core's own tests, or excluded with its reason in .cargo/mutants.toml; then each
## policy's native tests over its own code, reported but not required. Slow (about half an hour
## on 2 cores), so not part of `make test`. Reports: target/mutants/<crate>/mutants.out/.
MUTANTS_VERSION := 27.1.0
MUTANTS_FLAGS   ?=
mutants:
	@$(CARGO) mutants --version 2>/dev/null | grep -qx 'cargo-mutants $(MUTANTS_VERSION)' || \
		$(CARGO) install --locked cargo-mutants@$(MUTANTS_VERSION)
	@mkdir -p $(foreach c,evac-core $(POLICIES),target/mutants/$(c))
	@$(CARGO) mutants -p evac-core -o target/mutants/evac-core $(MUTANTS_FLAGS); core=$$?; \
	for p in $(POLICIES); do \
		$(CARGO) mutants -p $$p -o target/mutants/$$p $(MUTANTS_FLAGS); rc=$$?; \
		case $$rc in 0|2|3) ;; *) exit $$rc;; esac; \
	done; \
	exit $$core

## Fuzzing with cargo-fuzz (libFuzzer; needs a nightly toolchain: rustup toolchain install
## nightly): each target of fuzz/ for FUZZ_SECONDS, starting from its seeds. A fault stops the run
## and leaves its input in fuzz/artifacts/<target>/: copy it to fuzz/regressions/<target>/ (which
## `make test` replays through tests/fuzz_regressions.rs) and fix it. Not part of `make test`.
FUZZ_VERSION  := 0.13.2
FUZZ_SECONDS  ?= 60
FUZZ_TARGETS  := admission_review core_models quantity sim_api_request
fuzz_seeds_admission_review := examples/evictions/requests
fuzz_seeds_core_models      := fuzz/seeds/core_models
fuzz_seeds_quantity         := fuzz/seeds/quantity
fuzz_seeds_sim_api_request  := fuzz/seeds/sim_api_request
fuzz:
	@$(CARGO) fuzz --version 2>/dev/null | grep -q '$(FUZZ_VERSION)' || \
		$(CARGO) install --locked cargo-fuzz@$(FUZZ_VERSION)
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p fuzz/corpus/$$t; \
		case $$t in \
			admission_review) seeds="$(fuzz_seeds_admission_review)";; \
			core_models) seeds="$(fuzz_seeds_core_models)";; \
			quantity) seeds="$(fuzz_seeds_quantity)";; \
			sim_api_request) seeds="$(fuzz_seeds_sim_api_request)";; \
		esac; \
		echo "fuzzing $$t for $(FUZZ_SECONDS) s"; \
		$(CARGO) +nightly fuzz run --fuzz-dir fuzz --sanitizer none $$t \
			$(CURDIR)/fuzz/corpus/$$t $(CURDIR)/$$seeds $(CURDIR)/fuzz/regressions/$$t \
			-- -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096 || exit 1; \
	done

## The container image deploy/ runs (Dockerfile: multi-stage, evac and dist/policies/*.wasm
## under /policies), tagged with the release's version: v + the workspace's version in
## Cargo.toml, the tag deploy/kustomization.yaml installs. Needs docker or podman; not part of
## `make test`. `make -n image` prints the command without either.
VERSION    := $(shell sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
IMAGE_REPO ?= ghcr.io/evac-project/evac
IMAGE      ?= $(IMAGE_REPO):v$(VERSION)
IMAGE_TOOL ?= docker
image:
	@test -n "$(VERSION)" || { echo "no [workspace.package] version in Cargo.toml" >&2; exit 1; }
	$(IMAGE_TOOL) build --label org.opencontainers.image.version=$(VERSION) -t $(IMAGE) .

## The release's version (the workspace's, in Cargo.toml).
version:
	@echo $(VERSION)

clean:
	$(CARGO) clean
	rm -rf dist
