GO ?= go
BENCHTIME ?= 2s

.PHONY: build test bench lint fuzz

## build: compile the hpsearch binary into bin/
build:
	$(GO) build -o bin/hpsearch ./cmd/hpsearch

## test: every test, including the crash (kill -9) test and the CLI scripts
test:
	$(GO) test -count=1 ./...

## bench: every benchmark (figures go to docs/benchmarks.md)
bench:
	$(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) ./...

## fuzz: fuzz the space-file decoder for a minute
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=60s ./internal/spec

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
