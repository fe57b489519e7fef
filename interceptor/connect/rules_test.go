package connectlock_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/lockgate/lockgate/core"
	connectlock "github.com/lockgate/lockgate/interceptor/connect"
	"github.com/lockgate/lockgate/interceptor/connect/internal/testpbconnect"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/internal/rpcsuite"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	lockgatev1 "github.com/lockgate/lockgate/proto/lockgate/v1"
)

// dynamicFile builds, outside any registry, a file "dyn/dyn.proto" with a
// service dyn.S whose method Unary takes the test service's OrderRequest
// and carries the annotation lr (nil: none).
func dynamicFile(t *testing.T, lr *lockgatev1.LockRule) protoreflect.FileDescriptor {
	t.Helper()
	var opts *descriptorpb.MethodOptions
	if lr != nil {
		opts = &descriptorpb.MethodOptions{}
		proto.SetExtension(opts, lockgatev1.E_Lock, lr)
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("dyn/dyn.proto"),
		Package:    proto.String("dyn"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"testpb/order.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("S"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name:       proto.String("Unary"),
				InputType:  proto.String(".lockgate.testpb.OrderRequest"),
				OutputType: proto.String(".lockgate.testpb.OrderReply"),
				Options:    opts,
			}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatalf("protodesc.NewFile: %v", err)
	}
	return fd
}

// serveMux serves handlers by path on an HTTP/2 (h2c) httptest server and
// returns its client and base URL; both stop at t's cleanup.
func serveMux(t *testing.T, svc *rpcsuite.Service, handlers map[string]http.Handler) (*http.Client, string) {
	t.Helper()
	mux := http.NewServeMux()
	for p, h := range handlers {
		mux.Handle(p, h)
	}
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(func() {
		svc.Release()
		tr.CloseIdleConnections()
		hs.Close()
	})
	return &http.Client{Transport: tr}, hs.URL
}

// unaryHandler is a handler of procedure running svc.Unary (as method
// "Dyn"), with opts.
func unaryHandler(svc *rpcsuite.Service, procedure string, opts ...connect.HandlerOption) http.Handler {
	return connect.NewUnaryHandler(procedure, func(ctx context.Context, req *connect.Request[testpb.OrderRequest]) (*connect.Response[testpb.OrderReply], error) {
		return orders{svc}.unary(ctx, "Dyn", req)
	}, opts...)
}

// TestSchemaOutsideRegistry: a procedure that New did not find in the
// registry is locked by the annotation of its handler's schema
// (connect.WithSchema); the control, the same handler without the schema,
// is not locked. A schema annotation that does not compile fails the calls
// with CodeInternal, runs no handler, and is logged once.
func TestSchemaOutsideRegistry(t *testing.T) {
	const procedure = "/dyn.S/Unary"
	good := dynamicFile(t, &lockgatev1.LockRule{Key: "dyn:{user_id}", Wait: "0s"}).Services().Get(0).Methods().Get(0)
	var logs locktest.SyncBuffer
	e := newBase(t)
	lk, err := connectlock.New(e.Locker, connectlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(lk.Methods(), procedure) {
		t.Fatalf("Methods %v lists %s, which is in no registry", lk.Methods(), procedure)
	}
	ctx := locktest.Context(t)

	t.Run("locked by its schema", func(t *testing.T) {
		svc := rpcsuite.NewService()
		hc, base := serveMux(t, svc, map[string]http.Handler{procedure: unaryHandler(svc, procedure, connect.WithSchema(good), connect.WithInterceptors(lk))})
		client := connect.NewClient[testpb.OrderRequest, testpb.OrderReply](hc, base+procedure)
		svc.DrainEntered()
		done := make(chan error, 1)
		go func() {
			r, err := client.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", PauseMs: -1}))
			if err == nil && r.Msg.GetKey() != "dyn:u1" {
				t.Errorf("holder's lease key %q, want dyn:u1", r.Msg.GetKey())
			}
			done <- err
		}()
		svc.WaitEntered(t, "Dyn", nil)
		if !e.Exists(t, e.LockKey("dyn:u1")) {
			t.Fatalf("%s not locked while its handler holds", e.LockKey("dyn:u1"))
		}
		_, err := client.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1"}))
		if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("second call while held: %v, want ResourceExhausted", err)
		}
		svc.Release()
		if err := <-done; err != nil {
			t.Fatalf("holder: %v", err)
		}
	})
	t.Run("control without a schema", func(t *testing.T) {
		svc := rpcsuite.NewService()
		hc, base := serveMux(t, svc, map[string]http.Handler{procedure: unaryHandler(svc, procedure, connect.WithInterceptors(lk))})
		client := connect.NewClient[testpb.OrderRequest, testpb.OrderReply](hc, base+procedure)
		svc.DrainEntered()
		done := make(chan error, 1)
		go func() {
			_, err := client.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", PauseMs: -1}))
			done <- err
		}()
		svc.WaitEntered(t, "Dyn", nil)
		r, err := client.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1"}))
		if err != nil || r.Msg.GetKey() != "" {
			t.Fatalf("call without a schema = %v, %v; want the handler to run without a lease", r, err)
		}
		svc.Release()
		if err := <-done; err != nil {
			t.Fatalf("holder: %v", err)
		}
	})
	t.Run("limited by its schema", func(t *testing.T) {
		// The annotation's limit 2: two calls of a key inside, the third
		// busy (the control is "locked by its schema": the lock's second
		// call is busy).
		limited := dynamicFile(t, &lockgatev1.LockRule{Key: "dyn:{user_id}", Wait: "0s", Limit: 2}).Services().Get(0).Methods().Get(0)
		const limProcedure = "/dyn.S/Limited" // another procedure name: its own cache entry
		svc := rpcsuite.NewService()
		hc, base := serveMux(t, svc, map[string]http.Handler{limProcedure: unaryHandler(svc, limProcedure, connect.WithSchema(limited), connect.WithInterceptors(lk))})
		client := connect.NewClient[testpb.OrderRequest, testpb.OrderReply](hc, base+limProcedure)
		var done []chan error
		for range 2 {
			svc.DrainEntered()
			d := make(chan error, 1)
			go func() {
				r, err := client.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", PauseMs: -1}))
				if err == nil && r.Msg.GetKey() != "dyn:u1" {
					t.Errorf("holder's lease key %q, want dyn:u1", r.Msg.GetKey())
				}
				d <- err
			}()
			svc.WaitEntered(t, "Dyn", func() error {
				select {
				case err := <-d:
					return err
				default:
					return nil
				}
			})
			done = append(done, d)
		}
		_, err := client.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1"}))
		if connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("third call, two inside: %v, want ResourceExhausted", err)
		}
		if n := svc.Calls(); n != 2 {
			t.Fatalf("handler ran %d times, want 2", n)
		}
		svc.Release()
		for _, d := range done {
			if err := <-d; err != nil {
				t.Fatalf("holder: %v", err)
			}
		}
	})
	t.Run("bad schema annotation", func(t *testing.T) {
		bad := dynamicFile(t, &lockgatev1.LockRule{Key: "dyn:{nope}", FailOpen: true}).Services().Get(0).Methods().Get(0)
		const badProcedure = "/dyn.S/Bad" // another procedure name: its own cache entry
		svc := rpcsuite.NewService()
		hc, base := serveMux(t, svc, map[string]http.Handler{badProcedure: unaryHandler(svc, badProcedure, connect.WithSchema(bad), connect.WithInterceptors(lk))})
		client := connect.NewClient[testpb.OrderRequest, testpb.OrderReply](hc, base+badProcedure)
		for range 2 {
			_, err := client.CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1"}))
			if connect.CodeOf(err) != connect.CodeInternal || strings.Contains(err.Error(), "nope") {
				t.Fatalf("call under a bad schema annotation: %v, want CodeInternal with a generic message", err)
			}
		}
		if n := svc.Calls(); n != 0 {
			t.Fatalf("handler ran %d times under a bad rule, want 0 (even fail-open)", n)
		}
		if log := logs.String(); strings.Count(log, "level=ERROR") != 1 || !strings.Contains(log, badProcedure) || !strings.Contains(log, "nope") {
			t.Fatalf("log %q: want one error naming the procedure and the field", log)
		}
	})
}

// TestRegistryWithoutSchema: a handler built without connect.WithSchema
// (written by hand) of a procedure of the registry is locked by its
// annotation all the same; an unannotated one is not (the control).
func TestRegistryWithoutSchema(t *testing.T) {
	e := newBase(t)
	lk, err := connectlock.New(e.Locker)
	if err != nil {
		t.Fatal(err)
	}
	quick, plain := testpbconnect.OrdersQuickProcedure, testpbconnect.OrdersPlainProcedure
	hc, base := serveMux(t, e.Service, map[string]http.Handler{
		quick: unaryHandler(e.Service, quick, connect.WithInterceptors(lk)),
		plain: unaryHandler(e.Service, plain, connect.WithInterceptors(lk)),
	})
	ctx := locktest.Context(t)
	held, err := e.Locker.Lock(context.Background(), "order:u1:7")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	_, err = connect.NewClient[testpb.OrderRequest, testpb.OrderReply](hc, base+quick).CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", VoucherId: 7}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("Quick without a schema on a held key: %v, want ResourceExhausted", err)
	}
	r, err := connect.NewClient[testpb.OrderRequest, testpb.OrderReply](hc, base+plain).CallUnary(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1", VoucherId: 7}))
	if err != nil || r.Msg.GetKey() != "" {
		t.Fatalf("control: Plain = %v, %v; want the handler to run without a lease", r, err)
	}
}

// TestClientCallsPassThrough: the interceptor given to a client locks
// nothing (unary and streaming calls pass through); the control, the same
// call to a server with the interceptor, is busy.
func TestClientCallsPassThrough(t *testing.T) {
	e := newBase(t)
	lk, err := connectlock.New(e.Locker)
	if err != nil {
		t.Fatal(err)
	}
	bare := serve(t, e.Service, connectH2C)
	guarded := serve(t, rpcsuite.NewService(), connectH2C, connect.WithInterceptors(lk))
	ctx := locktest.Context(t)
	held, err := e.Locker.Lock(context.Background(), "order:u1:7")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	req := func() *connect.Request[testpb.OrderRequest] {
		return connect.NewRequest(&testpb.OrderRequest{UserId: "u1", VoucherId: 7})
	}

	viaLK := testpbconnect.NewOrdersClient(bare.http, bare.baseURL, connect.WithInterceptors(lk))
	if r, err := viaLK.Quick(ctx, req()); err != nil || r.Msg.GetKey() != "" {
		t.Fatalf("client call through the interceptor = %v, %v; want the server's unlocked reply", r, err)
	}
	w, err := viaLK.Watch(ctx, connect.NewRequest(&testpb.OrderRequest{UserId: "u1"}))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for w.Receive() {
		n++
	}
	if w.Err() != nil || n != 2 {
		t.Fatalf("streaming client call through the interceptor: %d replies, %v", n, w.Err())
	}
	w.Close()
	if _, err := guarded.client().Quick(ctx, req()); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("control: the server's interceptor on a held key: %v, want ResourceExhausted", err)
	}
}

// TestMethods: the annotated procedures of the registry are locked, the
// unannotated are not; a Go rule adds one.
func TestMethods(t *testing.T) {
	e := newBase(t)
	lk, err := connectlock.New(e.Locker, connectlock.WithRule(testpbconnect.OrdersPlainProcedure, connectlock.Rule{Key: "plain:{user_id}"}))
	if err != nil {
		t.Fatal(err)
	}
	got := lk.Methods()
	slices.Sort(got)
	want := []string{
		"/lockgate.testpb.Orders/Chat", "/lockgate.testpb.Orders/Nested", "/lockgate.testpb.Orders/Order",
		"/lockgate.testpb.Orders/Plain", "/lockgate.testpb.Orders/Quick", "/lockgate.testpb.Orders/Relaxed",
		"/lockgate.testpb.Orders/Upload", "/lockgate.testpb.Orders/Watch",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("locked procedures %v, want %v", got, want)
	}
}

// TestStartupErrors: a bad rule, annotation or Go rule, and a bad option
// are errors of New naming the procedure and the field at fault, the same
// checks as grpclock's (internal/rpclock does both); every rule here is
// fail-open, so that none of these mistakes can turn into calls that run
// without the lock. The suite's "Go rule settings apply" (TestSuite) is
// the control: the same setup without the fault serves calls under the
// lock.
func TestStartupErrors(t *testing.T) {
	e := newBase(t)
	const order, upload = testpbconnect.OrdersOrderProcedure, testpbconnect.OrdersUploadProcedure
	rule := func(key string) connectlock.Rule { return connectlock.Rule{Key: key, FailOpen: true} }
	goodRule := connectlock.WithRule(order, rule("o:{user_id}"))
	dynFiles := func(lr *lockgatev1.LockRule) *protoregistry.Files {
		files := &protoregistry.Files{}
		if err := files.RegisterFile(dynamicFile(t, lr)); err != nil {
			t.Fatal(err)
		}
		return files
	}
	for _, tc := range []struct {
		name string
		opts []connectlock.Option
		want []string
	}{
		{"go rule: field in a client stream", []connectlock.Option{connectlock.WithRule(upload, rule("u:{user_id}"))},
			[]string{"connectlock:", upload, "Go rule", "client-streaming", "{user_id}"}},
		{"go rule: unknown method", []connectlock.Option{connectlock.WithRule("/lockgate.testpb.Orders/Nope", rule("k:{md.x}"))},
			[]string{"/lockgate.testpb.Orders/Nope", "no method Nope"}},
		{"go rule: malformed procedure", []connectlock.Option{connectlock.WithRule("Orders/Order", rule("k:{md.x}"))},
			[]string{"Orders/Order", "/package.Service/Method"}},
		{"go rule: unknown field", []connectlock.Option{connectlock.WithRule(order, rule("o:{nope}"))},
			[]string{order, "no field \"nope\""}},
		{"go rule: uuid on an int64 field", []connectlock.Option{connectlock.WithRule(order, rule("o:{voucher_id:uuid}"))},
			[]string{order, "{voucher_id:uuid}", "OrderRequest.voucher_id", "int64"}},
		{"go rule: short ttl", []connectlock.Option{connectlock.WithRule(order, connectlock.Rule{Key: "o:{user_id}", TTL: time.Millisecond, FailOpen: true})},
			[]string{order, "Rule.TTL"}},
		{"go rule: negative wait", []connectlock.Option{connectlock.WithRule(order, connectlock.Rule{Key: "o:{user_id}", Wait: -time.Second, FailOpen: true})},
			[]string{order, "Rule.Wait", "core.NoWait"}},
		{"go rule: negative limit", []connectlock.Option{connectlock.WithRule(order, connectlock.Rule{Key: "o:{user_id}", Limit: -1, FailOpen: true})},
			[]string{order, "Rule.Limit", "negative"}},
		{"go rule: shared with a limit", []connectlock.Option{connectlock.WithRule(order, connectlock.Rule{Key: "o:{user_id}", Shared: true, Limit: 2, FailOpen: true})},
			[]string{order, "Rule.Shared with Rule.Limit 2"}},
		{"annotation: negative limit", []connectlock.Option{connectlock.WithFiles(dynFiles(&lockgatev1.LockRule{Key: "k:{user_id}", Limit: -3, FailOpen: true}))},
			[]string{"/dyn.S/Unary", "annotation", "limit -3", "negative"}},
		{"annotation: shared with a limit", []connectlock.Option{connectlock.WithFiles(dynFiles(&lockgatev1.LockRule{Key: "k:{user_id}", Shared: true, Limit: 2, FailOpen: true}))},
			[]string{"/dyn.S/Unary", "annotation", "shared with limit 2"}},
		{"go rule: nil option", []connectlock.Option{connectlock.WithRule(order, connectlock.Rule{Key: "o:{user_id}", FailOpen: true, Options: []core.LockOption{nil}})},
			[]string{order, "Rule.Options[0] is nil"}},
		{"annotation: bad wait", []connectlock.Option{connectlock.WithFiles(dynFiles(&lockgatev1.LockRule{Key: "k:{user_id}", Wait: "2 parsecs", FailOpen: true}))},
			[]string{"/dyn.S/Unary", "annotation", "wait \"2 parsecs\""}},
		{"annotation: unknown field", []connectlock.Option{connectlock.WithFiles(dynFiles(&lockgatev1.LockRule{Key: "k:{nope}", FailOpen: true}))},
			[]string{"/dyn.S/Unary", "annotation", "no field \"nope\""}},
		{"WithLockOptions: short ttl", []connectlock.Option{goodRule, connectlock.WithLockOptions(core.WithTTL(time.Millisecond))},
			[]string{"WithLockOptions", "option 0", core.ErrInvalid.Error()}},
		{"WithLockOptions: nil", []connectlock.Option{goodRule, connectlock.WithLockOptions(nil)},
			[]string{"WithLockOptions", "nil"}},
		{"WithReleaseTimeout: zero", []connectlock.Option{goodRule, connectlock.WithReleaseTimeout(0)},
			[]string{"WithReleaseTimeout", "not positive"}},
		{"WithFiles: nil", []connectlock.Option{goodRule, connectlock.WithFiles(nil)},
			[]string{"WithFiles", "nil"}},
		{"nil Option", []connectlock.Option{goodRule, nil},
			[]string{"option 1", "nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk, err := connectlock.New(e.Locker, tc.opts...)
			if err == nil {
				t.Fatalf("New succeeded (procedures %v), want an error", lk.Methods())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	t.Run("nil locker", func(t *testing.T) {
		if _, err := connectlock.New(nil, goodRule); err == nil || !strings.Contains(err.Error(), "nil *core.Locker") {
			t.Fatalf("New(nil) = %v, want an error naming the nil Locker", err)
		}
	})
}
