package testpb

// order.pb.go, service.pb.go, testpbgrpc/service_grpc.pb.go and the Connect stubs in
// interceptor/connect/internal/testpbconnect are generated from order.proto and service.proto by
// scripts/proto.sh (make proto does the same).
//go:generate bash ../../../scripts/proto.sh testpb
