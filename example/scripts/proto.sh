#!/usr/bin/env bash
# proto.sh: regenerate the committed Go code of the example's gRPC service
# (proto/seckill/v1). Same tools and versions as the repository's
# scripts/proto.sh, which it runs first to install them (protoc via
# apt-get when root, protoc-gen-go and protoc-gen-go-grpc into
# bin/proto-tools); the lockgate annotation is imported from ../proto.
set -euo pipefail
EXAMPLE="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="$(cd "$EXAMPLE/.." && pwd)"
"$ROOT/scripts/proto.sh"
export PATH="$ROOT/bin/proto-tools:$PATH"
cd "$EXAMPLE"
protoc -I proto -I "$ROOT/proto" -I /usr/include \
  --go_out=proto --go_opt=paths=source_relative \
  --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
  proto/seckill/v1/seckill.proto
gofmt -l proto | (! grep .) || { echo "generated code is not gofmt-clean" >&2; exit 1; }
echo "generated: example/proto/seckill/v1/seckill.pb.go seckill_grpc.pb.go" >&2
