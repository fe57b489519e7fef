package connectlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/lockgate/lockgate/core"
	connectlock "github.com/lockgate/lockgate/interceptor/connect"
	"github.com/lockgate/lockgate/interceptor/connect/internal/testpbconnect"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/redistest"
)

// shop is a Connect service whose Order and Quick procedures carry
// (lockgate.v1.lock) annotations (key "order:{user_id}:{voucher_id}").
type shop struct {
	testpbconnect.UnimplementedOrdersHandler
}

func (shop) Order(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	lease := connectlock.FromContext(ctx) // nil when the procedure is not locked
	// store.Write(ctx, req.Msg, lease.Fence()) ...
	return connect.NewResponse(&testpb.OrderReply{Key: lease.Key(), Fence: lease.Fence()}), nil
}

func (s shop) Quick(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
	return s.Order(ctx, req)
}

// Example serves a Connect service behind the interceptor: New reads the
// annotations from the registered descriptors, and the handler runs under
// the lock of the key its request names. A call for a key someone else
// holds is CodeResourceExhausted with a RetryInfo.
func Example() {
	srv, err := redistest.NewServer() // a throwaway redis-server; use your own address
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	locker, err := core.New(rdb)
	if err != nil {
		fmt.Println(err) // a nil client or a bad core option
		return
	}
	defer locker.Shutdown(context.Background())

	lk, err := connectlock.New(locker)
	if err != nil {
		fmt.Println(err) // a bad annotation or rule: the error names the procedure and the field
		return
	}
	mux := http.NewServeMux()
	mux.Handle(testpbconnect.NewOrdersHandler(shop{}, connect.WithInterceptors( /* auth, ... */ lk)))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	client := testpbconnect.NewOrdersClient(hs.Client(), hs.URL)
	ctx := context.Background()

	fmt.Println(slices.Contains(lk.Methods(), testpbconnect.OrdersOrderProcedure))
	r, err := client.Order(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", VoucherId: 7}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("handler ran under", r.Msg.GetKey(), "fence > 0:", r.Msg.GetFence() > 0)

	// Another owner holds order:u1:7: Quick (wait 50ms) is busy.
	held, err := locker.Lock(ctx, "order:u1:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = client.Quick(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", VoucherId: 7}))
	var ce *connect.Error
	if errors.As(err, &ce) {
		retry := false
		for _, d := range ce.Details() {
			if v, err := d.Value(); err == nil {
				_, retry = v.(*errdetails.RetryInfo)
			}
		}
		fmt.Println(ce.Code(), "with RetryInfo:", retry)
	}
	_ = held.Unlock(ctx)
	// Output:
	// true
	// handler ran under order:u1:7 fence > 0: true
	// resource_exhausted with RetryInfo: true
}

// ExampleWithRule locks procedures whose protos cannot be annotated, or
// overrides an annotation: the Go rule wins. A Go rule is checked against
// the method like an annotation, and a bad one is an error of New even
// when it is fail-open. (Nothing is locked before a call, so this example
// needs no running Redis.)
func ExampleWithRule() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390"})
	defer rdb.Close()
	locker, err := core.New(rdb)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	lk, err := connectlock.New(locker,
		// Lock Plain, which has no annotation, on the caller's identity.
		connectlock.WithRule(testpbconnect.OrdersPlainProcedure, connectlock.Rule{Key: "plain:{md.x-user-id}"}),
		// Replace Order's annotation: one attempt, a user id that "01"
		// and "1" spell alike.
		connectlock.WithRule(testpbconnect.OrdersOrderProcedure, connectlock.Rule{
			Key:  "order:{user_id:int}:{voucher_id}",
			Wait: core.NoWait,
		}),
	)
	fmt.Println(err == nil && slices.Contains(lk.Methods(), testpbconnect.OrdersPlainProcedure))

	_, err = connectlock.New(locker, connectlock.WithRule(testpbconnect.OrdersUploadProcedure, connectlock.Rule{Key: "u:{user_id}", FailOpen: true}))
	fmt.Println(err != nil)
	// Output:
	// true
	// true
}
