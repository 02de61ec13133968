# The targets operator-sdk users type, each a thin call of a command this repository already has.
# `make help` lists them. The cluster is the one in KUBECONFIG (hack/local-cluster.sh up starts a local one).
KUBECTL ?= kubectl
IMG ?= hybrid-operator:latest
ENGINE ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)
# hack/bootstrap.sh makes (or finds up to date) .venv and prints its bin directory; run only when needed.
BIN = $(shell hack/bootstrap.sh | tail -n 1)

.DEFAULT_GOAL := help
.PHONY: help run install uninstall deploy undeploy image test generate

help: ## List the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

run: ## Run the operator on this machine against the cluster in KUBECONFIG
	$(BIN)/hybrid-operator run --watches-file watches.yaml

install: generate ## Generate the CRDs and install them into the cluster
	$(KUBECTL) apply -k deploy/crds

uninstall: ## Delete the CRDs from the cluster (and every object of their kinds)
	$(KUBECTL) delete -k deploy/crds --ignore-not-found

deploy: generate ## Deploy the CRDs, RBAC and the operator Deployment into the cluster
	$(KUBECTL) apply -k deploy

undeploy: ## Delete what deploy created
	$(KUBECTL) delete -k deploy --ignore-not-found

image: ## Build the operator image (IMG=...): hack/build-image.sh where present, else podman or docker
	@if [ -x hack/build-image.sh ]; then hack/build-image.sh; \
	elif [ -n "$(ENGINE)" ]; then $(ENGINE) build -f Containerfile -t $(IMG) .; \
	else echo "no hack/build-image.sh, podman or docker (set ENGINE=)"; exit 1; fi

test: ## The whole test suite, as CI runs it (hack/test.sh)
	hack/test.sh

generate: ## Write deploy/crds from the roles' meta/argument_specs.yml and meta/operator.yml
	$(BIN)/hybrid-operator generate crds
