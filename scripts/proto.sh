#!/usr/bin/env bash
# proto.sh (make proto): regenerate the committed Go code of the lockgate
# proto annotations (proto/lockgate/v1) and of the grpclock test service
# (interceptor/grpc/internal/testpb).
#
# Tools:
#   protoc and descriptor.proto: Debian's protobuf-compiler and libprotobuf-dev,
#     installed with apt-get when missing and running as root; otherwise the
#     script says what to install.
#   protoc-gen-go, protoc-gen-go-grpc: built with `go install` at pinned
#     versions into bin/proto-tools (git-ignored), rebuilt when the version
#     differs. protoc-gen-go's version matches google.golang.org/protobuf in
#     go.mod.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

PROTOC_GEN_GO_VERSION=v1.36.12    # = google.golang.org/protobuf in go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2 # google.golang.org/grpc/cmd/protoc-gen-go-grpc
INCLUDE=/usr/include              # where libprotobuf-dev puts google/protobuf/*.proto

have_protoc() {
  command -v protoc >/dev/null 2>&1 && [ -f "$INCLUDE/google/protobuf/descriptor.proto" ]
}
if ! have_protoc; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "protoc missing: installing protobuf-compiler and libprotobuf-dev with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq protobuf-compiler libprotobuf-dev >/dev/null
  fi
  if ! have_protoc; then
    echo "protoc is not installed. Install it (Debian/Ubuntu: sudo apt-get install protobuf-compiler libprotobuf-dev) and run again." >&2
    exit 1
  fi
fi

TOOLS="$ROOT/bin/proto-tools"
mkdir -p "$TOOLS"
# ensure_tool NAME MODULE VERSION: go install MODULE@VERSION into $TOOLS
# unless NAME --version already reports VERSION.
ensure_tool() {
  local name=$1 module=$2 version=$3
  if [ -x "$TOOLS/$name" ] && "$TOOLS/$name" --version 2>/dev/null | grep -qF "${version#v}"; then
    return
  fi
  echo "installing $name $version" >&2
  GOBIN="$TOOLS" go install "$module@$version"
}
ensure_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
ensure_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"
export PATH="$TOOLS:$PATH"

echo "protoc: $(protoc --version)" >&2

# The annotation: import path "lockgate/v1/lock.proto".
protoc -I proto -I "$INCLUDE" \
  --go_out=proto --go_opt=paths=source_relative \
  proto/lockgate/v1/lock.proto

# The test service of interceptor/grpc: import path "testpb/order.proto".
protoc -I proto -I interceptor/grpc/internal -I "$INCLUDE" \
  --go_out=interceptor/grpc/internal --go_opt=paths=source_relative \
  --go-grpc_out=interceptor/grpc/internal --go-grpc_opt=paths=source_relative \
  interceptor/grpc/internal/testpb/order.proto

gofmt -l proto interceptor/grpc/internal/testpb | (! grep .) || { echo "generated code is not gofmt-clean" >&2; exit 1; }
echo "generated: proto/lockgate/v1/lock.pb.go interceptor/grpc/internal/testpb/order.pb.go order_grpc.pb.go" >&2
