GO ?= go
BENCHTIME ?= 2s
BENCHCOUNT ?= 3
# Test artifacts (the dashboard's browser screenshot) go to
# $(ARTIFACTS)/_artifacts/N/, one folder per test that saves any.
ARTIFACTS ?= $(CURDIR)/test-artifacts

.PHONY: build test test-integration bench bench-blob bench-search lint fuzz lambda-zip localstack-up localstack-down

# The trainer's Lambda bootstrap: static, for the provided.al2023 runtime.
LAMBDA_ARCHS ?= arm64 amd64
LAMBDA_BUILD_FLAGS = -tags lambda.norpc -trimpath -ldflags='-s -w'

## build: compile the hpsearch binary into bin/
build:
	$(GO) build -o bin/hpsearch ./cmd/hpsearch

## test: every test, including the crash (kill -9) test, the CLI scripts,
## the dashboard's headless-Chromium test (its screenshot is kept in
## $(ARTIFACTS)) and the integration tests, against the local stack
## (moto_server's S3 and SQS, and the Lambda front over aws-lambda-rie,
## started and stopped by scripts/with-stack)
test:
	mkdir -p $(ARTIFACTS)
	bash scripts/with-stack $(GO) test -count=1 -tags integration -artifacts -outputdir=$(ARTIFACTS) ./...

## test-integration: only the integration tests, against the local stack (or
## the one AWS_ENDPOINT_URL names, e.g. after eval "$$(localstack/stack env)")
test-integration:
	bash scripts/with-stack $(GO) test -count=1 -tags integration -run Integration ./...

## lambda-zip: the trainer's Lambda deployment packages,
## dist/trainer-lambda-{arm64,amd64}.zip (bootstrap in dist/lambda/ARCH/)
lambda-zip:
	@set -e; for arch in $(LAMBDA_ARCHS); do \
		echo "building dist/lambda/$$arch/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build $(LAMBDA_BUILD_FLAGS) -o dist/lambda/$$arch/bootstrap ./functions/trainer/cmd/bootstrap; \
		$(GO) run ./scripts/lambdazip -o dist/trainer-lambda-$$arch.zip dist/lambda/$$arch/bootstrap; \
		echo "wrote dist/trainer-lambda-$$arch.zip"; \
	done

## localstack-up: start the local stack in the background (see localstack/README.md);
## eval "$$(localstack/stack env)" then points a shell at it
localstack-up:
	bash localstack/stack up

## localstack-down: stop the local stack
localstack-down:
	bash localstack/stack down

## bench: every benchmark (figures go to docs/benchmarks.md), S3 on moto_server
bench:
	bash scripts/with-moto $(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) ./...

## bench-blob: the blob-store benchmarks (filesystem and S3 on moto_server)
bench-blob:
	bash scripts/with-moto $(GO) test -run='^$$' -bench=. -benchtime=$(BENCHTIME) -count=$(BENCHCOUNT) ./internal/blob/...

## bench-search: every sampler on Branin, Hartmann6, Rosenbrock and Ackley and
## every scheduler on a synthetic learning-curve problem, over 20 seeds, as
## Markdown tables for docs/benchmarks.md (hpsearch bench; a few minutes);
## BENCH_SEARCH_FLAGS adds flags, e.g. --orchestrator or --seeds 5
bench-search:
	$(GO) run ./cmd/hpsearch bench $(BENCH_SEARCH_FLAGS)

## fuzz: fuzz the space-file decoder for a minute
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=60s ./internal/spec

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
