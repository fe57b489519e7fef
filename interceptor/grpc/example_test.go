package grpclock_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb/testpbgrpc"
)

// Example serves a service whose methods carry (lockgate.v1.lock)
// annotations: New reads them from the registered descriptors, and the
// interceptors are chained like any others. (Nothing is locked before a
// call, so the example needs no running Redis.)
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390"})
	defer rdb.Close()
	locker, err := core.New(rdb)
	if err != nil {
		log.Fatal(err) // a nil client or a bad core option
	}
	defer locker.Close()

	lk, err := grpclock.New(locker)
	if err != nil {
		log.Fatal(err) // a bad annotation: the error names the method and the field
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor( /* auth, logging, ... */ lk.Unary()),
		grpc.ChainStreamInterceptor( /* auth, logging, ... */ lk.Stream()),
	)
	testpbgrpc.RegisterOrdersServer(srv, testpbgrpc.UnimplementedOrdersServer{})
	defer srv.Stop()

	methods := lk.Methods()
	slices.Sort(methods)
	for _, m := range methods {
		fmt.Println(m)
	}
	// Output:
	// /lockgate.testpb.Orders/Chat
	// /lockgate.testpb.Orders/Nested
	// /lockgate.testpb.Orders/Order
	// /lockgate.testpb.Orders/Quick
	// /lockgate.testpb.Orders/Relaxed
	// /lockgate.testpb.Orders/Upload
	// /lockgate.testpb.Orders/Watch
}

// ExampleWithRule locks methods whose protos cannot be annotated, or
// overrides an annotation: the Go rule wins.
func ExampleWithRule() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390"})
	defer rdb.Close()
	locker, err := core.New(rdb)
	if err != nil {
		log.Fatal(err) // a nil client or a bad core option
	}
	defer locker.Close()

	lk, err := grpclock.New(locker,
		// Lock Plain, which has no annotation, on the caller's identity.
		grpclock.WithRule("/lockgate.testpb.Orders/Plain", grpclock.Rule{Key: "plain:{md.x-user-id}"}),
		// Replace Order's annotation: one attempt, a 10s lease, a user
		// id that "01" and "1" spell alike.
		grpclock.WithRule("/lockgate.testpb.Orders/Order", grpclock.Rule{
			Key:  "order:{user_id:int}:{voucher_id}",
			Wait: core.NoWait,
			TTL:  10 * time.Second,
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(slices.Contains(lk.Methods(), "/lockgate.testpb.Orders/Plain"))

	// A Go rule is checked against the method like an annotation, and a
	// bad one is an error of New even when it is fail-open.
	_, err = grpclock.New(locker, grpclock.WithRule("/lockgate.testpb.Orders/Upload", grpclock.Rule{Key: "u:{user_id}"}))
	fmt.Println(err != nil)
	_, err = grpclock.New(locker, grpclock.WithRule("/lockgate.testpb.Orders/Plain", grpclock.Rule{
		Key: "plain:{md.x-user-id}", TTL: 10 * time.Millisecond, FailOpen: true,
	}))
	fmt.Println(err != nil)
	// Output:
	// true
	// true
	// true
}

// ExampleFromContext reads the lease in a handler, to pass its fence
// with the writes the lock protects.
func ExampleFromContext() {
	handler := func(ctx context.Context, req *testpb.OrderRequest) (*testpb.OrderReply, error) {
		lease := grpclock.FromContext(ctx) // nil when the method is not locked
		if lease == nil {
			return &testpb.OrderReply{}, nil
		}
		// store.Write(ctx, req, lease.Fence()) ...
		return &testpb.OrderReply{Key: lease.Key(), Fence: lease.Fence()}, nil
	}
	r, _ := handler(context.Background(), &testpb.OrderRequest{UserId: "u1"})
	fmt.Printf("key %q fence %d\n", r.GetKey(), r.GetFence())
	// Output: key "" fence 0
}
