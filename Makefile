# amdrun's build and test entry points. `make test` is the command the
# README and CI run.
GO        ?= go
BIN       ?= bin/amdrun
VERSION   ?= $(shell sh packaging/version.sh)
LDFLAGS   := -s -w -X main.version=$(VERSION)
FUZZTIME  ?= 30s
CONTAIN_PROOF_OUT ?= /tmp/amdrun-contain-proof
PKGS      := ./...

.PHONY: deadcode dist dist-check dist-order-check wheel wheel-check deb deb-check min-go build demo test short race darwin vet lint fmt-check fuzz bench placement-report gpu-proof slurm-e2e clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/amdrun

# Quick start: plan a 4-GPU job on this node (on the bundled MI250 example
# topology when the machine has no GPU) without starting anything.
# On a machine without GPUs (amdrun topo finds none) both commands plan on
# the bundled example topology instead, the seed document's MI250 node.
demo: build
	@src=; if ! $(BIN) topo >/dev/null 2>&1; then src="--source example"; \
	  echo "(no GPU found here: planning on the bundled example topology, --source example)"; fi; \
	set -x; $(BIN) topo $$src && $(BIN) --ngpus 4 --dry-run --explain $$src examples/allreduce.py

fmt-check:
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$bad" ]; then echo "gofmt needed: $$bad"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# staticcheck, at a pinned version (fetched through the Go module proxy).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) ./...

# Unreachable functions, by golang.org/x/tools/cmd/deadcode at a pinned
# version (through the Go module proxy). Both passes fail the target:
# with -test (the tests count as callers) on any function unreachable
# even so; without it, on any non-test function that only tests reach.
# Test-support packages (internal/testutil, cmd/amdrun/internal/cmdtest),
# which only tests import, are the one exception (docs/development.md).
DEADCODE ?= golang.org/x/tools/cmd/deadcode@v0.38.0
TESTSUPPORT = ^(internal/testutil|cmd/amdrun/internal/cmdtest)/
deadcode:
	@out=$$($(GO) run $(DEADCODE) -test ./...) || exit 1; \
	if [ -n "$$out" ]; then echo "$$out"; echo "deadcode: unreachable even from the tests"; exit 1; fi
	@out=$$($(GO) run $(DEADCODE) ./...) || exit 1; \
	out=$$(echo "$$out" | grep -Ev '$(TESTSUPPORT)'); \
	if [ -n "$$out" ]; then echo "$$out"; echo "deadcode: reached only from tests (move test support into a test-support package, or delete it)"; exit 1; fi
	@echo "deadcode: every non-test function is reachable from amdrun"

# Everything: unit tests and the end-to-end tier (real torch jobs, network
# namespaces, leases across processes, other users).
test: fmt-check vet
	$(GO) test -count=1 -timeout 30m $(PKGS)

# The unit tier: no child processes, well under 20 s on 2 cores.
short:
	$(GO) test -short -count=1 $(PKGS)

# The race detector over the packages that run processes and goroutines.
race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 30m ./internal/launch/... ./cmd/...

# amdrun builds for macOS, where it plans (--dry-run) but does not launch.
darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/amdrun
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...

# Release files under DIST: static, reproducible binaries (CGO off,
# -trimpath, no build id, no VCS stamp: the bytes depend only on the
# source, VERSION and the Go toolchain), shell completions, man pages
# (cobra's generator, cmd/amdrun/internal/genman, dated by the commit),
# LICENSE and SHA256SUMS.
# darwin/arm64 plans only (--dry-run). dist-check builds twice and
# compares. dist, wheel and deb each replace only their own files, in any
# order, and rewrite SHA256SUMS over every file in DIST.
DIST       ?= dist
DIST_ARCHES = linux/amd64 linux/arm64 darwin/arm64
DIST_FLAGS  = -trimpath -buildvcs=false -ldflags '-s -w -buildid= -X main.version=$(VERSION)'
SUMS        = cd $(DIST) && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
dist:
	mkdir -p $(DIST) && rm -rf $(DIST)/amdrun-linux-* $(DIST)/amdrun-darwin-* $(DIST)/completions $(DIST)/man
	mkdir -p $(DIST)/completions && cp LICENSE $(DIST)/LICENSE
	for p in $(DIST_ARCHES); do \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build $(DIST_FLAGS) \
	    -o $(DIST)/amdrun-$${p%/*}-$${p#*/} ./cmd/amdrun || exit 1; \
	done
	host=$(DIST)/amdrun-$$($(GO) env GOOS)-$$($(GO) env GOARCH); \
	$$host completion bash > $(DIST)/completions/amdrun.bash && \
	$$host completion zsh > $(DIST)/completions/_amdrun && \
	$$host completion fish > $(DIST)/completions/amdrun.fish
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) AMDRUN_VERSION=$(VERSION) \
	  $(GO) run ./cmd/amdrun/internal/genman $(DIST)/man/man1
	$(SUMS)

# make dist twice must give the same bytes; both Linux binaries static.
dist-check:
	rm -rf $(DIST).1 $(DIST).2
	$(MAKE) dist DIST=$(DIST).1 && $(MAKE) dist DIST=$(DIST).2
	cmp $(DIST).1/SHA256SUMS $(DIST).2/SHA256SUMS
	cd $(DIST).1 && sha256sum -c --quiet SHA256SUMS
	for a in amd64 arm64; do file $(DIST).1/amdrun-linux-$$a | grep -q 'statically linked' || { file $(DIST).1/amdrun-linux-$$a; exit 1; }; done
	$(DIST).1/amdrun-linux-amd64 version
	rm -rf $(DIST).2

# manylinux x86_64 and aarch64 wheels of the dist binaries (offline, with
# Debian's python3-setuptools and python3-wheel; see docs/install.md);
# wheel-check installs the x86_64 one into a fresh venv and runs a 2-rank
# gloo job from it without --python.
wheel: dist
	sh packaging/wheel/build.sh $(DIST) $(VERSION)
	$(SUMS)

wheel-check: wheel
	sh packaging/wheel/check.sh $(DIST)

# Debian packages (amd64 and arm64) of the dist files: binary, man pages,
# completions, tmpfiles.d snippet and amdrun-lease-init.service;
# deb-check (root) installs the amd64 one, checks it and removes it.
deb: dist
	sh packaging/deb/build.sh $(DIST) $(VERSION) amd64
	sh packaging/deb/build.sh $(DIST) $(VERSION) arm64
	$(SUMS)

deb-check: deb
	sh packaging/deb/check.sh $$(ls $(DIST)/amdrun_*_amd64.deb)

# make deb, wheel and dist in that order into a fresh $(DIST).order: none
# deletes another's files, SHA256SUMS covers them all, LICENSE everywhere.
dist-order-check:
	sh packaging/dist-order-check.sh $(DIST).order

# go.mod's go line is the oldest Go that builds amdrun and its tests
# (1.24: the benchmarks use testing.B.Loop; golang.org/x/sys is held at
# v0.41.0, the last release that asks no more). Check it with exactly that
# toolchain, which the go command fetches through the module proxy.
MIN_GO = $(shell sed -n 's/^go //p' go.mod)
min-go:
	GOTOOLCHAIN=go$(MIN_GO) GOFLAGS=-mod=readonly $(GO) vet ./...
	GOTOOLCHAIN=go$(MIN_GO) CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/amdrun

# Run every fuzz target for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s -parallel 1 $$pkg || exit 1; \
	  done; \
	done

# As root, with Debian's slurmctld, slurmd and slurm-client and
# python3-torch: a private two-node Slurm cluster in network namespaces
# runs examples/slurm/allreduce.sbatch (docs/multinode.md, "Slurm"). Fails, rather
# than skips, when something it needs is missing.
slurm-e2e:
	AMDRUN_REQUIRE_SLURM=1 AMDRUN_REQUIRE_TORCH=1 $(GO) test -count=1 -run '^TestRealSlurm' -v ./cmd/amdrun/

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./internal/...

# For every real topology in testdata and every k: the sets of amdrun's
# policies against the brute-force optimum, a naive launcher, optimum-amd's
# amdrun, go-gpuallocator and the ROCm device plugin (summary in docs/performance.md).
placement-report:
	$(GO) test -c -o bin/selector.test ./internal/selector
	bin/selector.test -test.run '^TestPlacementReport$$' -placement-report

# On a machine with NVIDIA GPUs, PyTorch and torchrun: topology, NCCL
# all-reduce and launch time against torchrun, busy avoidance, fail-fast.
gpu-proof: build
	bench/gpu-proof.sh $(BIN)

# On a node with 2 NVIDIA GPUs and PyTorch: SIGKILL of amdrun mid-epoch,
# time until nothing of the job is left, a queued job gets both GPUs
# (issue 13). CONTAIN_PROOF_FLAGS=--cpu checks the script on any machine.
contain-proof: build
	bench/contain-proof.sh $(BIN) $(CONTAIN_PROOF_OUT) $(CONTAIN_PROOF_FLAGS)

clean:
	rm -rf bin $(DIST) $(DIST).1 $(DIST).2 $(DIST).order
