package grpclock_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/lockgate/lockgate/core"
	grpclock "github.com/lockgate/lockgate/interceptor/grpc"
	lockgatev1 "github.com/lockgate/lockgate/proto/lockgate/v1"
)

// dynamicFiles builds a registry holding one file "dyn/dyn.proto" with a
// service dyn.S whose methods carry the given annotations: Unary,
// ClientStream and Bidi (nil: no annotation).
func dynamicFiles(t *testing.T, unary, client, bidi *lockgatev1.LockRule) *protoregistry.Files {
	t.Helper()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	methodOpts := func(r *lockgatev1.LockRule) *descriptorpb.MethodOptions {
		if r == nil {
			return nil
		}
		o := &descriptorpb.MethodOptions{}
		proto.SetExtension(o, lockgatev1.E_Lock, r)
		return o
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("dyn/dyn.proto"),
		Package: proto.String("dyn"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Sub"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("x"), Number: proto.Int32(1), Type: str, Label: opt, JsonName: proto.String("x")},
			}},
			{Name: proto.String("Req"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("user_id"), Number: proto.Int32(1), Type: str, Label: opt, JsonName: proto.String("userId")},
				{Name: proto.String("tags"), Number: proto.Int32(2), Type: str, Label: rep, JsonName: proto.String("tags")},
				{Name: proto.String("sub"), Number: proto.Int32(3), Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".dyn.Sub"), Label: opt, JsonName: proto.String("sub")},
				{Name: proto.String("price"), Number: proto.Int32(4), Type: descriptorpb.FieldDescriptorProto_TYPE_DOUBLE.Enum(), Label: opt, JsonName: proto.String("price")},
			}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("S"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Unary"), InputType: proto.String(".dyn.Req"), OutputType: proto.String(".dyn.Req"), Options: methodOpts(unary)},
				{Name: proto.String("ClientStream"), InputType: proto.String(".dyn.Req"), OutputType: proto.String(".dyn.Req"), ClientStreaming: proto.Bool(true), Options: methodOpts(client)},
				{Name: proto.String("Bidi"), InputType: proto.String(".dyn.Req"), OutputType: proto.String(".dyn.Req"), ClientStreaming: proto.Bool(true), ServerStreaming: proto.Bool(true), Options: methodOpts(bidi)},
			},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatalf("protodesc.NewFile: %v", err)
	}
	files := &protoregistry.Files{}
	if err := files.RegisterFile(fd); err != nil {
		t.Fatalf("RegisterFile: %v", err)
	}
	return files
}

// TestStartupErrors: every bad rule, annotation or Go rule, is an error of
// New naming the method and the problem; nothing is found at call time.
func TestStartupErrors(t *testing.T) {
	e := newBase(t)
	rule := func(key string) grpclock.Rule { return grpclock.Rule{Key: key} }
	for _, tc := range []struct {
		name string
		opts []grpclock.Option
		want []string // substrings of the error
	}{
		{"go rule: field in a client stream", []grpclock.Option{grpclock.WithRule(methodUpload, rule("u:{user_id}"))},
			[]string{methodUpload, "Go rule", "client-streaming", "{user_id}"}},
		{"go rule: explicit field in a client stream", []grpclock.Option{grpclock.WithRule(methodUpload, rule("u:{md.x}:{field.item.sku}"))},
			[]string{methodUpload, "field.item.sku"}},
		{"go rule: unknown method", []grpclock.Option{grpclock.WithRule("/lockgate.testpb.Orders/Nope", rule("k:{md.x}"))},
			[]string{"/lockgate.testpb.Orders/Nope", "no method Nope"}},
		{"go rule: unknown service", []grpclock.Option{grpclock.WithRule("/no.Such/M", rule("k:{md.x}"))},
			[]string{"/no.Such/M", "no registered service"}},
		{"go rule: malformed method name", []grpclock.Option{grpclock.WithRule("Orders/Order", rule("k:{md.x}"))},
			[]string{"Orders/Order", "/package.Service/Method"}},
		{"go rule: unknown field", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{nope}"))},
			[]string{methodOrder, "no field \"nope\""}},
		{"go rule: unknown nested field", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{field.item.nope}"))},
			[]string{methodOrder, "no field \"nope\""}},
		{"go rule: message field", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{field.item}"))},
			[]string{methodOrder, "is a message"}},
		{"go rule: path through a scalar", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{field.user_id.x}"))},
			[]string{methodOrder, "not a message"}},
		{"go rule: malformed template", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{user_id"))},
			[]string{methodOrder, "unbalanced"}},
		{"go rule: unsupported source", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{query.user_id}"))},
			[]string{methodOrder, "query"}},
		{"go rule: empty key", []grpclock.Option{grpclock.WithRule(methodOrder, rule(""))},
			[]string{methodOrder, "key is empty"}},
		{"go rule: short ttl", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", TTL: time.Millisecond})},
			[]string{methodOrder, "ttl"}},
		{"go rule: negative wait", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", Wait: -time.Second})},
			[]string{methodOrder, "wait"}},
		{"annotation: bad wait", []grpclock.Option{grpclock.WithFiles(dynamicFiles(t, &lockgatev1.LockRule{Key: "k:{user_id}", Wait: "2 parsecs"}, nil, nil))},
			[]string{"/dyn.S/Unary", "annotation", "wait \"2 parsecs\""}},
		{"annotation: short ttl", []grpclock.Option{grpclock.WithFiles(dynamicFiles(t, &lockgatev1.LockRule{Key: "k:{user_id}", Ttl: "10ms"}, nil, nil))},
			[]string{"/dyn.S/Unary", "ttl \"10ms\""}},
		{"annotation: repeated field", []grpclock.Option{grpclock.WithFiles(dynamicFiles(t, &lockgatev1.LockRule{Key: "k:{tags}"}, nil, nil))},
			[]string{"/dyn.S/Unary", "repeated"}},
		{"annotation: double field", []grpclock.Option{grpclock.WithFiles(dynamicFiles(t, &lockgatev1.LockRule{Key: "k:{price}"}, nil, nil))},
			[]string{"/dyn.S/Unary", "floating-point"}},
		{"annotation: field in client stream and bidi, both reported", []grpclock.Option{grpclock.WithFiles(dynamicFiles(t, nil,
			&lockgatev1.LockRule{Key: "k:{user_id}"}, &lockgatev1.LockRule{Key: "k:{field.sub.x}"}))},
			[]string{"/dyn.S/ClientStream", "/dyn.S/Bidi", "client-streaming or bidi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk, err := grpclock.New(e.locker, tc.opts...)
			if err == nil {
				t.Fatalf("New succeeded (methods %v), want an error", lk.Methods())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestRulesLoaded: the annotated methods of the registry are locked, the
// unannotated are not; a Go rule fixes a bad annotation (it wins, so the
// annotation is not even checked); dynamic descriptors work through
// WithFiles.
func TestRulesLoaded(t *testing.T) {
	e := newBase(t)
	lk, err := grpclock.New(e.locker)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := lk.Methods()
	slices.Sort(got)
	want := []string{
		"/lockgate.testpb.Orders/Chat", "/lockgate.testpb.Orders/Nested", "/lockgate.testpb.Orders/Order",
		"/lockgate.testpb.Orders/Quick", "/lockgate.testpb.Orders/Relaxed", "/lockgate.testpb.Orders/Upload",
		"/lockgate.testpb.Orders/Watch",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("locked methods %v, want %v", got, want)
	}

	files := dynamicFiles(t, &lockgatev1.LockRule{Key: "k:{field.sub.x}"}, &lockgatev1.LockRule{Key: "k:{user_id}"}, &lockgatev1.LockRule{Key: "k:{md.x}"})
	if _, err := grpclock.New(e.locker, grpclock.WithFiles(files)); err == nil {
		t.Fatal("New with a client stream naming a field: no error")
	}
	lk, err = grpclock.New(e.locker, grpclock.WithFiles(files),
		grpclock.WithRule("/dyn.S/ClientStream", grpclock.Rule{Key: "k:{md.x-user-id}", Options: []core.Option{core.WithWait(0)}}))
	if err != nil {
		t.Fatalf("New with a Go rule over the bad annotation: %v", err)
	}
	got = lk.Methods()
	slices.Sort(got)
	if want := []string{"/dyn.S/Bidi", "/dyn.S/ClientStream", "/dyn.S/Unary"}; !slices.Equal(got, want) {
		t.Fatalf("locked methods %v, want %v", got, want)
	}
}
