package lockgatev1_test

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	lockgatev1 "github.com/lockgate/lockgate/proto/lockgate/v1"
)

// Example sets and reads the (lockgate.v1.lock) option of a method, as
// protoc does from an annotated .proto and the interceptor does at start-up.
func Example() {
	opts := &descriptorpb.MethodOptions{}
	proto.SetExtension(opts, lockgatev1.E_Lock, &lockgatev1.LockRule{
		Key:  "order:{user_id}:{voucher_id}",
		Wait: "2s",
		Ttl:  "30s",
	})

	rule := proto.GetExtension(opts, lockgatev1.E_Lock).(*lockgatev1.LockRule)
	fmt.Println(rule.GetKey(), rule.GetWait(), rule.GetTtl(), rule.GetFailOpen())
	// Output: order:{user_id}:{voucher_id} 2s 30s false
}
