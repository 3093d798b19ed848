GO ?= go
BENCHTIME ?= 2s
BENCHCOUNT ?= 3

.PHONY: build test bench bench-blob lint fuzz

## build: compile the hpsearch binary into bin/
build:
	$(GO) build -o bin/hpsearch ./cmd/hpsearch

## test: every test, including the crash (kill -9) test and the CLI scripts,
## with a local S3 (moto_server, started and stopped by scripts/with-moto)
test:
	bash scripts/with-moto $(GO) test -count=1 ./...

## bench: every benchmark (figures go to docs/benchmarks.md), S3 on moto_server
bench:
	bash scripts/with-moto $(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) ./...

## bench-blob: the blob-store benchmarks (filesystem and S3 on moto_server)
bench-blob:
	bash scripts/with-moto $(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) -count=$(BENCHCOUNT) ./internal/blob/...

## fuzz: fuzz the space-file decoder for a minute
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=60s ./internal/spec

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
