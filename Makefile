# `make test` runs every check and test (with CI=true or WDC_TEST_S3=1 it
# first installs the S3 test server the backend tests need:
# scripts/moto.sh), the release check last, then, when
# CI=true or WDC_TEST_KUBERNETES=1, the Kubernetes end-to-end tests
# (test-kubernetes: needs root) and after them the Ray end-to-end tests
# (test-ray; WDC_TEST_RAY=1 runs these alone); .ci/run calls exactly it.
GO ?= go

.PHONY: build image test test-kubernetes test-ray quickstart release release-check

# bin/wdc, and beside it bin/wdc-agent: the worker alone (no configuration
# language, no cluster clients), what pods and Ray jobs run.
build:
	CGO_ENABLED=0 $(GO) build -o bin/wdc ./cmd/wdc
	CGO_ENABLED=0 $(GO) build -o bin/wdc-agent ./cmd/wdc-agent

# The OCI image of wdc-agent (FROM scratch, wdc-agent its entrypoint: a
# Kubernetes pool's agent_image), for linux on this machine's architecture
# (PLATFORM=linux/arm64 for another), into dist/image: a tarball and an OCI
# layout, made by ./release with go-containerregistry, no container daemon.
# Push either with a registry client (docs/configuration.md).
image:
	$(GO) run ./release image -o dist/image $(if $(PLATFORM),-platform $(PLATFORM)) $(if $(VERSION),-version $(VERSION))

test:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/wdc
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/wdc-agent
	@if [ "$$CI" = true ] || [ "$$WDC_TEST_S3" = 1 ]; then \
		scripts/moto.sh install; \
	else \
		echo "moto install skipped: set WDC_TEST_S3=1 (or CI=true) to install the S3 test server (the backend tests skip without it)"; \
	fi
	$(GO) test -count=1 -timeout 20m ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 20m ./state/... ./engine/... ./agent/... ./artifact/ ./providers/...
	$(MAKE) --no-print-directory release-check
	@if [ "$$CI" = true ] || [ "$$WDC_TEST_KUBERNETES" = 1 ]; then \
		$(MAKE) --no-print-directory test-kubernetes; \
	else \
		echo "test-kubernetes skipped: set WDC_TEST_KUBERNETES=1 (or CI=true) to run it (needs root)"; \
	fi
	@if [ "$$CI" = true ] || [ "$$WDC_TEST_KUBERNETES" = 1 ] || [ "$$WDC_TEST_RAY" = 1 ]; then \
		$(MAKE) --no-print-directory test-ray; \
	else \
		echo "test-ray skipped: set WDC_TEST_RAY=1 (or CI=true) to run it"; \
	fi

# The Kubernetes end-to-end tests on a throwaway cluster with a real kubelet
# (scripts/test-kubernetes.sh: installs containerd, runc, the CNI plugins
# and busybox-static when missing, builds the testbed of WDC_K8S_TESTBED,
# default ../shared/tools/k8s-testbed.sh, brings it up and always down).
# Never alongside other tests: they are CPU-sensitive.
test-kubernetes:
	GO=$(GO) scripts/test-kubernetes.sh

# The Ray end-to-end tests on a throwaway local Ray head (scripts/test-ray.sh:
# scripts/ray-head.sh installs ray[default]==2.60.0 into a virtualenv under
# $$HOME/.cache/wdc-ray, starts a head on 127.0.0.1 with token
# authentication and always stops it). After test-kubernetes, never
# alongside it.
test-ray:
	GO=$(GO) scripts/test-ray.sh

quickstart: build
	bin/wdc --chdir examples/quickstart validate
	bin/wdc --chdir examples/quickstart apply --auto-approve

# The release of the commit at HEAD, into dist/ (docs/release.md). VERSION
# overrides the version taken from the latest v* tag; PLATFORMS (e.g.
# PLATFORMS=linux/amd64, comma-separated) builds only those, a quick
# partial release for trying it.
release:
	$(GO) run ./release build -dist dist $(if $(VERSION),-version $(VERSION)) $(if $(PLATFORMS),-platforms $(PLATFORMS))

# Proves a release: makes one in a temporary folder, verifies its sums,
# rebuilds linux/amd64 twice with empty caches and compares the bytes, and
# builds, vets and runs the quickstart from the source archive alone.
release-check:
	$(GO) run ./release check
