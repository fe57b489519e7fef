#!/usr/bin/env bash
# proto.sh (make proto): regenerate the committed Go code of the lockgate
# proto annotations (proto/lockgate/v1) and of the RPC suite's test service
# (internal/rpcsuite/testpb: its messages and descriptors, its gRPC stubs in
# testpb/testpbgrpc, its Connect stubs in
# interceptor/connect/internal/testpbconnect).
#
# Tools:
#   protoc and descriptor.proto: Debian's protobuf-compiler and libprotobuf-dev,
#     installed with apt-get when missing and running as root; otherwise the
#     script says what to install.
#   protoc-gen-go, protoc-gen-go-grpc, protoc-gen-connect-go: built with
#     `go install` at pinned versions into bin/proto-tools (git-ignored),
#     rebuilt when the version differs. protoc-gen-go's version matches
#     google.golang.org/protobuf in go.mod, protoc-gen-connect-go's
#     connectrpc.com/connect in interceptor/connect/go.mod.
#
# Usage: proto.sh [all|annotations|testpb] (default all). annotations is
# proto/lockgate/v1, testpb the RPC suite's test service and its stubs; each
# is run by the //go:generate line in its package's generate.go, so that
# `go generate ./...` regenerates them as `make proto` does.
set -euo pipefail
WHAT="${1:-all}"
case "$WHAT" in
  all|annotations|testpb) ;;
  *) echo "usage: $0 [all|annotations|testpb]" >&2; exit 2 ;;
esac
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

PROTOC_GEN_GO_VERSION=v1.36.12    # = google.golang.org/protobuf in go.mod
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2 # google.golang.org/grpc/cmd/protoc-gen-go-grpc
PROTOC_GEN_CONNECT_GO_VERSION=v1.21.1 # = connectrpc.com/connect in interceptor/connect/go.mod
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
ensure_tool protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go "$PROTOC_GEN_CONNECT_GO_VERSION"
export PATH="$TOOLS:$PATH"

echo "protoc: $(protoc --version)" >&2

# The annotation: import path "lockgate/v1/lock.proto".
if [ "$WHAT" = all ] || [ "$WHAT" = annotations ]; then
protoc -I proto -I "$INCLUDE" \
  --go_out=proto --go_opt=paths=source_relative \
  proto/lockgate/v1/lock.proto
gofmt -l proto | (! grep .) || { echo "generated code is not gofmt-clean" >&2; exit 1; }
echo "generated: proto/lockgate/v1/lock.pb.go" >&2
fi
[ "$WHAT" = annotations ] && exit 0

# The RPC suite's test service: import paths "testpb/order.proto" (messages)
# and "testpb/service.proto" (the Orders service), both in Go package
# internal/rpcsuite/testpb.
MODULE=github.com/lockgate/lockgate
SUITE=internal/rpcsuite
protoc -I proto -I "$SUITE" -I "$INCLUDE" \
  --go_out="$SUITE" --go_opt=paths=source_relative \
  "$SUITE/testpb/order.proto" "$SUITE/testpb/service.proto"

# Its gRPC stubs, in a package of their own (testpb/testpbgrpc) so that the
# messages, the suite and the Connect tests do not import grpc-go: the
# service's file is mapped to that package for protoc-gen-go-grpc only, the
# messages stay in testpb.
protoc -I proto -I "$SUITE" -I "$INCLUDE" \
  --go-grpc_out=. --go-grpc_opt=module="$MODULE" \
  --go-grpc_opt=Mtestpb/service.proto="$MODULE/$SUITE/testpb/testpbgrpc;testpbgrpc" \
  "$SUITE/testpb/service.proto"

# Its Connect stubs, in the Connect module (interceptor/connect), so that the
# library module does not import connectrpc.com/connect. The generated file
# names no import path of its own: it is written to a scratch directory and
# moved.
CONNECT_OUT=interceptor/connect/internal/testpbconnect
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
protoc -I proto -I "$SUITE" -I "$INCLUDE" \
  --connect-go_out="$scratch" --connect-go_opt=paths=source_relative \
  "$SUITE/testpb/service.proto"
mkdir -p "$CONNECT_OUT"
mv "$scratch/testpb/testpbconnect/service.connect.go" "$CONNECT_OUT/service.connect.go"

gofmt -l "$SUITE/testpb" "$CONNECT_OUT" | (! grep .) || { echo "generated code is not gofmt-clean" >&2; exit 1; }
echo "generated: $SUITE/testpb/{order,service}.pb.go $SUITE/testpb/testpbgrpc/service_grpc.pb.go $CONNECT_OUT/service.connect.go" >&2
