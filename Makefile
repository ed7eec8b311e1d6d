# `make test` runs every check and test; .ci/run calls exactly it.
GO ?= go

.PHONY: build test quickstart

build:
	CGO_ENABLED=0 $(GO) build -o bin/wdc ./cmd/wdc

test:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/wdc
	$(GO) test -count=1 -timeout 20m ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 20m ./state/ ./engine/ ./agent/ ./providers/...

quickstart: build
	bin/wdc --chdir examples/quickstart validate
	bin/wdc --chdir examples/quickstart apply --auto-approve
