# wakebench: see README.md.
GO     ?= go
CONFIG ?= testdata/demo.json

.PHONY: bench test vet ci

## bench: the whole protocol on vllmsim (demo profile); writes out/
bench:
	WAKEBENCH_CONFIG=$(CONFIG) $(GO) test -count=1 -timeout 30m -v -run . .

## test: every package, race detector on (what CI runs)
test:
	$(GO) test -count=1 -race ./...

## vet: go vet and gofmt
vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

ci: vet test
