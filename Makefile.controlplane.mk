# Makefile.controlplane.mk: targets for the local Kubernetes control plane used
# by the operator tests (include this from the main Makefile).
#
#   make kubernetes-binaries       build/cache etcd + control-plane binaries
#   make kubernetes-node-binaries  also kubelet and kubeadm (kind node images)
#   make controlplane              start it; kubeconfig in $(CONTROLPLANE_DIR)
#   make controlplane-status
#   make controlplane-down         stop it (safe to repeat)
#
# Binaries are cached in $${TENSORGRID_CACHE:-~/.cache/tensorgrid}/kubernetes/.

# Directory of this file, so the targets work whatever includes it.
TG_CONTROLPLANE_MK_DIR := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
CONTROLPLANE_DIR ?= $(TG_CONTROLPLANE_MK_DIR)/.cache/controlplane

.PHONY: kubernetes-binaries kubernetes-node-binaries controlplane controlplane-status controlplane-down

kubernetes-binaries:
	$(TG_CONTROLPLANE_MK_DIR)/hack/build-kubernetes.sh

kubernetes-node-binaries:
	$(TG_CONTROLPLANE_MK_DIR)/hack/build-kubernetes.sh --with-node

controlplane: kubernetes-binaries
	$(TG_CONTROLPLANE_MK_DIR)/hack/controlplane.sh up $(CONTROLPLANE_DIR)

controlplane-status:
	$(TG_CONTROLPLANE_MK_DIR)/hack/controlplane.sh status $(CONTROLPLANE_DIR)

controlplane-down:
	$(TG_CONTROLPLANE_MK_DIR)/hack/controlplane.sh down $(CONTROLPLANE_DIR)
