package seckillv1

// seckill.pb.go, seckill_grpc.pb.go and seckillv1connect/seckill.connect.go are generated from
// seckill.proto by example/scripts/proto.sh, which runs the repository's scripts/proto.sh first for
// its tools (make proto does the same).
//go:generate bash ../../../scripts/proto.sh
