#!/usr/bin/env bash
# proto.sh: regenerate the committed Go code of the example's RPC service
# (proto/seckill/v1): its messages (seckill.pb.go), its gRPC stubs
# (seckill_grpc.pb.go) and its Connect stubs
# (seckillv1connect/seckill.connect.go). Same tools and versions as the
# repository's scripts/proto.sh, which it runs first to install them
# (protoc via apt-get when root; protoc-gen-go, protoc-gen-go-grpc and
# protoc-gen-connect-go, pinned, into bin/proto-tools); the lockgate
# annotation is imported from ../proto.
set -euo pipefail
EXAMPLE="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="$(cd "$EXAMPLE/.." && pwd)"
"$ROOT/scripts/proto.sh"
export PATH="$ROOT/bin/proto-tools:$PATH"
cd "$EXAMPLE"
# protoc-gen-connect-go writes its file into a package of its own next to
# the messages' (seckillv1connect, from go_package's seckillv1), inside
# this module: no move needed.
protoc -I proto -I "$ROOT/proto" -I /usr/include \
  --go_out=proto --go_opt=paths=source_relative \
  --go-grpc_out=proto --go-grpc_opt=paths=source_relative \
  --connect-go_out=proto --connect-go_opt=paths=source_relative \
  proto/seckill/v1/seckill.proto
gofmt -l proto | (! grep .) || { echo "generated code is not gofmt-clean" >&2; exit 1; }
echo "generated: example/proto/seckill/v1/seckill.pb.go seckill_grpc.pb.go seckillv1connect/seckill.connect.go" >&2
