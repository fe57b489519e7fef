package lockgatev1

// lock.pb.go is generated from lock.proto by scripts/proto.sh (make proto does the same).
//go:generate bash ../../../scripts/proto.sh annotations
