# amdrun's build and test entry points. `make test` is the command the
# README and CI run.
GO        ?= go
BIN       ?= bin/amdrun
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
FUZZTIME  ?= 30s
CONTAIN_PROOF_OUT ?= /tmp/amdrun-contain-proof
PKGS      := ./...

.PHONY: build demo test short race darwin vet lint fmt-check fuzz bench placement-report gpu-proof slurm-e2e clean

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

# Everything: unit tests and the end-to-end tier (real torch jobs, network
# namespaces, leases across processes, other users).
test: fmt-check vet
	$(GO) test -count=1 $(PKGS)

# The unit tier: no child processes, well under 20 s on 2 cores.
short:
	$(GO) test -short -count=1 $(PKGS)

# The race detector over the packages that run processes and goroutines.
race:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./internal/launch/... ./cmd/...

# amdrun builds for macOS, where it plans (--dry-run) but does not launch.
darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/amdrun
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...

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
	rm -rf bin
