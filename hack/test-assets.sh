#!/usr/bin/env bash
# Builds the real kube-apiserver, kube-controller-manager, etcd and kubectl
# the tests run against, from the pinned tools module in test/assets, and the
# helm the docs' commands run with, from test/manifests (which renders the
# chart with the same version).
# Each binary is rebuilt only when it is missing or reports another version.
set -euo pipefail
bin=$1
mkdir -p "$bin"
cd "$(dirname "$0")/../test/assets"
# The versions are the ones test/assets/go.mod pins, so that file is the only place to change them.
kube=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)

ldflags="-X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/client-go/pkg/version.gitVersion=$kube"
# grep reads the whole output (no -q): exiting at the first match would kill the
# binary with SIGPIPE, and pipefail would then report a mismatch and rebuild.
has() { [ -x "$bin/$1" ] && "$bin/$1" "${@:2}" 2>/dev/null | grep -- "$want" >/dev/null; }

want=$kube
# Kubernetes' commands are built by one go build, which links them side by side.
cmds=()
has kube-apiserver --version || cmds+=(k8s.io/kubernetes/cmd/kube-apiserver)
has kube-controller-manager --version || cmds+=(k8s.io/kubernetes/cmd/kube-controller-manager)
has kubectl version --client || cmds+=(k8s.io/kubernetes/cmd/kubectl)
if [ ${#cmds[@]} -gt 0 ]; then
	echo "building ${cmds[*]##*/} $kube"
	go build -ldflags "$ldflags" -o "$bin/" "${cmds[@]}"
fi
want=${etcd#v}
has etcd --version || { echo "building etcd $etcd"; go build -o "$bin/etcd" go.etcd.io/etcd/server/v3; }

cd ../manifests
helm=$(go list -m -f '{{.Version}}' helm.sh/helm/v4)
want=$helm
has helm version --short || { echo "building helm $helm"; go build -ldflags "-X helm.sh/helm/v4/internal/version.version=$helm" -o "$bin/helm" helm.sh/helm/v4/cmd/helm; }
