# wakebench: see README.md.
GO     ?= go
CONFIG ?= testdata/demo.json
# go-nvml's cgo build warns about every NVML 13 deprecation; silence them.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: bench test stress vet fuzz gpu nogpu runner perf benchmarks ci soak k8s fleet gate-power figures device-check device-check-build variants
# A count, not a duration: with -fuzztime 10s Go's fuzzing coordinator can fail a target with a
# bare "context deadline exceeded" and no crasher when busy cores keep its workers from answering
# before the deadline (golang/go#75804, fixed in go1.27; seen here on a loaded 2-core machine).
FUZZTIME ?= 40000x

# The protocol's tests (not the harness's own robustness tests). TestProtocol
# runs the phases in the order internal/phases.List lists them.
PROTOCOL := '^Test(GPUFacts|Protocol|Outputs|RegressionGate)$$'

## bench: the whole protocol on vllmsim (demo profile); writes out/
bench:
	WAKEBENCH_CONFIG=$(CONFIG) $(GO) test -count=1 -timeout 30m -v -run $(PROTOCOL) .

## soak: the soak phase alone, 200 handoffs over three tiny models (testdata/soak.json); writes out/soak
SOAK_CONFIG ?= testdata/soak.json
soak:
	WAKEBENCH_CONFIG=$(SOAK_CONFIG) $(GO) test -count=1 -timeout 30m -v -run '^TestSoak$$' .

## test: the quick loop: every package's tests with the race detector, -short: the long tests
## (testmain.Long: child runs of the whole protocol, soaks, every phase against a fault; docs/testing.md's
## table lists each) and the root package's whole protocol are skipped here and run once in make
## stress, under load; four packages at a time: their tests mostly wait on simulated servers; the
## two slowest first (go test starts packages in the order named), so that they do not run last, alone
TEST_FIRST := ./internal/vllmsim ./internal/harness
test:
	$(GO) test -short -p 4 -count=1 -race -timeout 10m $(TEST_FIRST) ./...

## figures: the whole-run figure test (docs/metrics.md): the protocol on vllmsim as it is, with the
## harness's own reads slowed, and with each server operation slowed in turn (ten runs side by
## side, about 5 minutes on 2 cores); exactly the figures whose row names the slowed operation move
figures:
	WAKEBENCH_FIGURES=1 $(GO) test -count=1 -race -timeout 20m -v -run '^TestEveryFigureMeansItsName$$' .

## stress: every test of the packages whose tests run in real time (servers, routers, clocks) and of
## internal/gate (its Monte Carlo power tests are long), the long ones make test skips included (no -short), with -race while cmd/cpuhog keeps every core busy,
## as on a shared CI runner: the one place CI runs the long tests; STRESS_ROUNDS=3 repeats it to
## hunt a flake; each round's load average is printed
STRESS_PKGS   ?= . ./internal/protocol ./internal/harness ./internal/vllmsim \
	./internal/statecost ./internal/traffic ./internal/pool ./internal/fleetjob ./internal/router \
	./internal/nodeagent ./internal/load
# Without -race, beside the rest: internal/gate's long tests are Monte Carlo arithmetic in one
# goroutine a trial, which -race slowed 50-fold (5 s alone without it; 250 to 350 s of the loaded
# step with it, CPU the real-time packages then lacked); make test runs its short tests, which
# cover its concurrent code, with -race.
STRESS_NORACE_PKGS ?= ./internal/gate
STRESS_ROUNDS ?= 1
# Four packages at a time, as make test, the longest first: their tests mostly wait on simulated
# servers (with two at a time, the sum of their times, 1,440 s here, took 826 s; the root alone takes 400).
STRESS_P      ?= 4
# Four tests at a time within a package (go test's -parallel, GOMAXPROCS by default: 2 here): the
# root package's child runs (TestEveryEraPasses' eras, the robustness runs) wait mostly on simulated
# servers, and the root is the step's critical path.
STRESS_PARALLEL ?= 4
stress:
	@mkdir -p bin && $(GO) build -o bin/cpuhog ./cmd/cpuhog
	@$(GO) test -race -count=1 -run '^$$' -exec /bin/true $(STRESS_PKGS) >/dev/null
	@$(GO) test -count=1 -run '^$$' -exec /bin/true $(STRESS_NORACE_PKGS) >/dev/null
	@bin/cpuhog & hog=$$!; trap 'kill $$hog 2>/dev/null' EXIT; \
	for i in $$(seq 1 $(STRESS_ROUNDS)); do \
		echo "stress: round $$i of $(STRESS_ROUNDS) with every core busy (load $$(cut -d' ' -f1-3 /proc/loadavg))"; \
		$(GO) test -count=1 -p 1 -timeout 30m $(STRESS_NORACE_PKGS) & norace=$$!; \
		$(GO) test -count=1 -race -p $(STRESS_P) -parallel $(STRESS_PARALLEL) -timeout 30m $(STRESS_PKGS) || { wait $$norace; exit 1; }; \
		wait $$norace || exit 1; \
	done

## vet: go vet with and without the gpu tag, and gofmt
vet:
	$(GO) vet ./...
	$(GO) vet -tags gpu ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

## fuzz: the SSE parser, the error-body parser, the chunk decoder (against encoding/json) and the config loader, FUZZTIME each (executions)
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzStreamRead$$' -fuzztime $(FUZZTIME) ./internal/vllm
	$(GO) test -run '^$$' -fuzz '^FuzzParseError$$' -fuzztime $(FUZZTIME) ./internal/vllm
	$(GO) test -run '^$$' -fuzz '^FuzzChunkDecode$$' -fuzztime $(FUZZTIME) ./internal/vllm
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/config

## gpu: on a GPU runner with vLLM (see README): the protocol with gpu.json (without one: the gpu
## tag's defaults, the reference run's models), then the NVML hardware tests
GPU_CONFIG ?= $(wildcard gpu.json)
gpu:
	WAKEBENCH_CONFIG=$(GPU_CONFIG) $(GO) test -tags gpu -count=1 -timeout 0 -v -run $(PROTOCOL) .
	WAKEBENCH_CONFIG=$(GPU_CONFIG) $(GO) test -tags gpu -count=1 -v ./internal/backend ./internal/cuda

## device-check: the first thing to run on a new GPU runner, vLLM not needed (docs/gpu.md): builds
## the gpu-tag test binaries and vllmsim into bin/device-check, then runs them on the GPU
## (scripts/device-check.sh): the NVML and CUDA hardware tests, the link probe, and the protocol
## with vllmsim in real-device mode on two small models (testdata/device.json); prints the
## report's summary; under 5 minutes. On a GPU machine without Go: make device-check-build here,
## copy bin/device-check and the checkout there, run scripts/device-check.sh
DEVICE_BIN := bin/device-check
device-check: device-check-build
	scripts/device-check.sh

device-check-build:
	@mkdir -p $(DEVICE_BIN)
	$(GO) test -c -tags gpu -ldflags=-s\ -w -o $(DEVICE_BIN)/wakebench.test .
	$(GO) test -c -tags gpu -ldflags=-s\ -w -o $(DEVICE_BIN)/backend.test ./internal/backend
	$(GO) test -c -tags gpu -ldflags=-s\ -w -o $(DEVICE_BIN)/cuda.test ./internal/cuda
	$(GO) build -ldflags="-s -w" -o $(DEVICE_BIN)/vllmsim ./cmd/vllmsim

## runner: the card's command exactly as README.md gives it (go test -tags gpu -timeout 0 ./...), here as on a
## GPU runner with no NVML: a stand-in vllm on PATH (vllmsim behind vllm serve's command line, bin/standin/vllm)
## and RUNNER_CONFIG ("memory": "none"); green, with the protocol's report PASS in out/runner (~2 min)
RUNNER_CONFIG ?= testdata/runner.json
runner:
	RUNNER_CONFIG=$(RUNNER_CONFIG) GO=$(GO) scripts/runner-check.sh

## nogpu: on a machine without an NVIDIA driver, `go test -tags gpu` FAILs with a NOT RUN
## report naming the driver to install, and `go test -short -tags gpu` skips the hardware
nogpu:
	scripts/nogpu-check.sh

## k8s: the Kubernetes phase on a local control plane (etcd, kube-apiserver, kube-scheduler,
## kube-controller-manager v1.34.3, built once from source by scripts/k8s-build.sh: minutes the
## first time) and wakebench's node agent: the control plane's, the phase's and the harness's
## Kubernetes tests (a broken scheduler is a named FAIL), then
## TestKubernetes with testdata/k8s.json; writes out/k8s
K8S_CONFIG ?= testdata/k8s.json
k8s:
	@bin=$$(scripts/k8s-build.sh) && export WAKEBENCH_K8S_BIN=$$bin && \
	$(GO) test -count=1 -race ./internal/controlplane ./internal/kubephase && \
	$(GO) test -count=1 -race -run Kubernetes ./internal/harness && \
	WAKEBENCH_CONFIG=$(K8S_CONFIG) $(GO) test -count=1 -timeout 20m -v -run '^TestKubernetes$$' .

## fleet: the fleet run (TestFleet, docs/fleet.md) on the local control plane of make k8s (same
## cached build) with several node agents, each a simulated GPU of its own kind (L20, H100, A100,
## one H100 degraded, two nodes with faults): the coordinator's and the report's tests, then
## TestFleet with testdata/fleet.json; writes out/fleet/fleet (fleet.json, fleet.md, fleet.html, bench.txt)
FLEET_CONFIG ?= testdata/fleet.json
fleet:
	@bin=$$(scripts/k8s-build.sh) && export WAKEBENCH_K8S_BIN=$$bin && \
	$(GO) test -count=1 ./internal/fleetjob ./internal/fleetreport && \
	WAKEBENCH_CONFIG=$(FLEET_CONFIG) $(GO) test -count=1 -timeout 20m -v -run '^TestFleet$$' .

## gate-power: the regression gate's false alarms and power, measured (RERUNS=20 BASE=10: ~70 short
## runs of testdata/gate-power.json, ~70 min on 2 cores; LOAD=1 runs 50 under a CPU hog on every
## core, ~60 min, then 50 quiet, ~115 min in all); prints one table with the machine and its load, runs in out/gate-power;
## VARIANTS=1 adds the variant runs' paired verdict (VARIANT_BLOCKS_LOAD=6 for the hog's, docs/compare.md)
gate-power:
	scripts/gate-power.sh

## variants: the two example variant runs (docs/variants.md) on vllmsim side by side, VARIANT_BLOCKS
## blocks each: two vLLM releases as two vllmsim eras, and a sleep option off and on (--sleep-mode-offload-cudagraph); writes
## out/variants-upgrade and out/variants-options, then shows benchstat -col variant of each
VARIANT_BLOCKS ?= 2
variants:
	@export WAKEBENCH_PROTOCOL_VARIANT_BLOCKS=$(VARIANT_BLOCKS); a=0; b=0; \
	WAKEBENCH_CONFIG=testdata/variants-upgrade.json $(GO) test -count=1 -timeout 20m -run $(PROTOCOL) . & p1=$$!; \
	WAKEBENCH_CONFIG=testdata/variants-options.json $(GO) test -count=1 -timeout 20m -run $(PROTOCOL) . & p2=$$!; \
	wait $$p1 || a=$$?; wait $$p2 || b=$$?; \
	for run in upgrade options; do \
		case $$run in upgrade) ref=v0.31 var=v0.33 ;; *) ref=none var=offload-cudagraph ;; esac; \
		o=$$($(GO) tool benchstat -col variant -filter .name:Sleep out/variants-$$run/bench.txt) || exit 1; \
		printf '%s\n' "$$o"; \
		printf '%s\n' "$$o" | grep -Eq "│ +$$ref +│ +$$var +│" || { echo "benchstat -col variant: no $$ref | $$var columns in out/variants-$$run/bench.txt" >&2; exit 1; }; \
	done; \
	exit $$((a | b))

## benchmarks: the card's Go benchmarks (BenchmarkRestart, BenchmarkServe, BenchmarkSleep,
## BenchmarkSwitch) once each on vllmsim, writing out/benchmarks: each step a benchmark drives
## (its scratch record included) runs at least once
benchmarks:
	WAKEBENCH_OUT_DIR=out/benchmarks $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x .

## perf: the harness's own overhead against its goals and against wrk and vegeta (installs them); prints one table
perf:
	scripts/perf.sh

## ci: what CI runs (.ci/run: every command above, the long ones as short smokes)
ci:
	bash .ci/run
