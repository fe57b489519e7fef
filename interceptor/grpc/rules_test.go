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
// ClientStream and Bidi (nil: no annotation). Its request dyn.Req has
// fields of every kind a key may name: user_id (string), tags (repeated),
// sub (message), price (double), n (int64), flag (bool), blob (bytes),
// kind (enum dyn.Kind), u (uint32).
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
	field := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, json string) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ.Enum(), Label: opt, JsonName: proto.String(json)}
	}
	kind := field("kind", 8, descriptorpb.FieldDescriptorProto_TYPE_ENUM, "kind")
	kind.TypeName = proto.String(".dyn.Kind")
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("dyn/dyn.proto"),
		Package: proto.String("dyn"),
		Syntax:  proto.String("proto3"),
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Kind"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("KIND_UNSPECIFIED"), Number: proto.Int32(0)},
				{Name: proto.String("KIND_A"), Number: proto.Int32(1)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Sub"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("x"), Number: proto.Int32(1), Type: str, Label: opt, JsonName: proto.String("x")},
			}},
			{Name: proto.String("Req"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("user_id"), Number: proto.Int32(1), Type: str, Label: opt, JsonName: proto.String("userId")},
				{Name: proto.String("tags"), Number: proto.Int32(2), Type: str, Label: rep, JsonName: proto.String("tags")},
				{Name: proto.String("sub"), Number: proto.Int32(3), Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".dyn.Sub"), Label: opt, JsonName: proto.String("sub")},
				{Name: proto.String("price"), Number: proto.Int32(4), Type: descriptorpb.FieldDescriptorProto_TYPE_DOUBLE.Enum(), Label: opt, JsonName: proto.String("price")},
				field("n", 5, descriptorpb.FieldDescriptorProto_TYPE_INT64, "n"),
				field("flag", 6, descriptorpb.FieldDescriptorProto_TYPE_BOOL, "flag"),
				field("blob", 7, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "blob"),
				kind,
				field("u", 9, descriptorpb.FieldDescriptorProto_TYPE_UINT32, "u"),
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

// TestStartupErrors: every bad rule, annotation or Go rule, and every bad
// option is an error of New naming the method (for rules) and the field at
// fault; nothing is found at call time. Every rule in the table is
// fail-open, so that none of these mistakes can turn into calls that run
// without the lock: the suite's "Go rule settings apply" (TestSuite,
// internal/rpcsuite) shows the same setup without the fault serving calls
// under the lock.
func TestStartupErrors(t *testing.T) {
	e := newBase(t)
	rule := func(key string) grpclock.Rule { return grpclock.Rule{Key: key, FailOpen: true} }
	withOpts := func(opts ...core.LockOption) grpclock.Rule {
		r := rule("o:{user_id}")
		r.Options = opts
		return r
	}
	// goodRule is fail-open and valid: the cases that break an option of
	// New carry it, so the error cannot come from the rule.
	goodRule := grpclock.WithRule(methodOrder, rule("o:{user_id}"))
	dyn := func(r *lockgatev1.LockRule) grpclock.Option {
		r.FailOpen = true
		return grpclock.WithFiles(dynamicFiles(t, r, nil, nil))
	}
	for _, tc := range []struct {
		name string
		opts []grpclock.Option
		want []string // substrings of the error
	}{
		// Keys.
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
		{"go rule: typed message field", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{field.item:int}"))},
			[]string{methodOrder, "{field.item:int}", "is a message"}},
		{"go rule: path through a scalar", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{field.user_id.x}"))},
			[]string{methodOrder, "not a message"}},
		{"go rule: malformed template", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{user_id"))},
			[]string{methodOrder, "unbalanced"}},
		{"go rule: unknown type", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{user_id:float}"))},
			[]string{methodOrder, "float"}},
		{"go rule: unsupported source", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{query.user_id}"))},
			[]string{methodOrder, "query"}},
		{"go rule: empty key", []grpclock.Option{grpclock.WithRule(methodOrder, rule(""))},
			[]string{methodOrder, "key is empty"}},
		// Typed placeholders that can never parse from their field.
		{"go rule: uuid on an int64 field", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{voucher_id:uuid}"))},
			[]string{methodOrder, "Go rule", "{voucher_id:uuid}", "OrderRequest.voucher_id", "int64", ":uuid"}},
		{"go rule: uuid on a nested int64 field", []grpclock.Option{grpclock.WithRule(methodOrder, rule("o:{field.item.count:uuid}"))},
			[]string{methodOrder, "{field.item.count:uuid}", "Item.count"}},
		{"annotation: uuid on a uint32 field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{u:uuid}"})},
			[]string{"/dyn.S/Unary", "annotation", "{u:uuid}", "dyn.Req.u"}},
		{"annotation: int on a bool field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{flag:int}"})},
			[]string{"/dyn.S/Unary", "{flag:int}", "dyn.Req.flag", "bool"}},
		{"annotation: uint on an enum field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{field.kind:uint}"})},
			[]string{"/dyn.S/Unary", "{field.kind:uint}", "dyn.Req.kind", "enum"}},
		{"annotation: int on a bytes field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{blob:int}"})},
			[]string{"/dyn.S/Unary", "{blob:int}", "dyn.Req.blob", "bytes"}},
		{"annotation: uuid on a bytes field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{blob:uuid}"})},
			[]string{"/dyn.S/Unary", "{blob:uuid}", "dyn.Req.blob"}},
		{"annotation: uuid on an int64 field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{n:uuid}"})},
			[]string{"/dyn.S/Unary", "{n:uuid}", "dyn.Req.n"}},
		// Wait and TTL of a Go rule.
		{"go rule: short ttl", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", TTL: time.Millisecond, FailOpen: true})},
			[]string{methodOrder, "Rule.TTL"}},
		{"go rule: negative ttl", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", TTL: -time.Second, FailOpen: true})},
			[]string{methodOrder, "Rule.TTL"}},
		{"go rule: negative wait", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", Wait: -time.Second, FailOpen: true})},
			[]string{methodOrder, "Rule.Wait", "core.NoWait"}},
		{"go rule: negative wait other than NoWait", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", Wait: core.NoWait - 1, FailOpen: true})},
			[]string{methodOrder, "Rule.Wait"}},
		{"go rule: negative limit", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", Limit: -1, FailOpen: true})},
			[]string{methodOrder, "Rule.Limit", "negative"}},
		{"go rule: shared with a limit", []grpclock.Option{grpclock.WithRule(methodOrder, grpclock.Rule{Key: "o:{user_id}", Shared: true, Limit: 2, FailOpen: true})},
			[]string{methodOrder, "Rule.Shared with Rule.Limit 2"}},
		// Rule.Options, checked through core.Combine.
		{"go rule: option with a short ttl", []grpclock.Option{grpclock.WithRule(methodOrder, withOpts(core.WithTTL(10*time.Millisecond)))},
			[]string{methodOrder, "Rule.Options[0]", "ttl", core.ErrInvalid.Error()}},
		{"go rule: option with a negative wait", []grpclock.Option{grpclock.WithRule(methodOrder, withOpts(core.WithoutWatchdog(), core.WithWait(-5*time.Second)))},
			[]string{methodOrder, "Rule.Options[1]", "wait"}},
		{"go rule: option with a zero release timeout", []grpclock.Option{grpclock.WithRule(methodOrder, withOpts(core.WithReleaseTimeout(0)))},
			[]string{methodOrder, "Rule.Options[0]", "release timeout"}},
		{"go rule: nil option", []grpclock.Option{grpclock.WithRule(methodOrder, withOpts(core.WithoutWatchdog(), nil))},
			[]string{methodOrder, "Rule.Options[1] is nil"}},
		// Annotations.
		{"annotation: bad wait", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{user_id}", Wait: "2 parsecs"})},
			[]string{"/dyn.S/Unary", "annotation", "wait \"2 parsecs\""}},
		{"annotation: negative wait", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{user_id}", Wait: "-1s"})},
			[]string{"/dyn.S/Unary", "annotation", "wait \"-1s\"", "negative"}},
		{"annotation: negative limit", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{user_id}", Limit: -3})},
			[]string{"/dyn.S/Unary", "annotation", "limit -3", "negative"}},
		{"annotation: shared with a limit", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{user_id}", Shared: true, Limit: 2})},
			[]string{"/dyn.S/Unary", "annotation", "shared with limit 2"}},
		{"annotation: short ttl", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{user_id}", Ttl: "10ms"})},
			[]string{"/dyn.S/Unary", "ttl \"10ms\""}},
		{"annotation: repeated field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{tags}"})},
			[]string{"/dyn.S/Unary", "repeated"}},
		{"annotation: double field", []grpclock.Option{dyn(&lockgatev1.LockRule{Key: "k:{price}"})},
			[]string{"/dyn.S/Unary", "floating-point"}},
		{"annotation: field in client stream and bidi, both reported", []grpclock.Option{grpclock.WithFiles(dynamicFiles(t, nil,
			&lockgatev1.LockRule{Key: "k:{user_id}", FailOpen: true}, &lockgatev1.LockRule{Key: "k:{field.sub.x}", FailOpen: true}))},
			[]string{"/dyn.S/ClientStream", "/dyn.S/Bidi", "client-streaming or bidi"}},
		// Options of New.
		{"WithLockOptions: short ttl", []grpclock.Option{goodRule, grpclock.WithLockOptions(core.WithTTL(time.Millisecond))},
			[]string{"WithLockOptions", "option 0", "ttl", core.ErrInvalid.Error()}},
		{"WithLockOptions: bad wait", []grpclock.Option{goodRule, grpclock.WithLockOptions(core.WithoutWatchdog(), core.WithWait(-time.Hour))},
			[]string{"WithLockOptions", "option 1", "wait"}},
		{"WithLockOptions: nil", []grpclock.Option{goodRule, grpclock.WithLockOptions(nil)},
			[]string{"WithLockOptions", "nil"}},
		{"WithReleaseTimeout: zero", []grpclock.Option{goodRule, grpclock.WithReleaseTimeout(0)},
			[]string{"WithReleaseTimeout", "not positive"}},
		{"WithReleaseTimeout: negative", []grpclock.Option{goodRule, grpclock.WithReleaseTimeout(-time.Second)},
			[]string{"WithReleaseTimeout", "not positive"}},
		{"WithFiles: nil", []grpclock.Option{goodRule, grpclock.WithFiles(nil)},
			[]string{"WithFiles", "nil"}},
		{"nil Option", []grpclock.Option{goodRule, nil},
			[]string{"option 1", "nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lk, err := grpclock.New(e.Locker, tc.opts...)
			if err == nil {
				t.Fatalf("New succeeded (methods %v), want an error", lk.Methods())
			}
			t.Logf("%v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	t.Run("nil locker", func(t *testing.T) {
		if _, err := grpclock.New(nil, goodRule); err == nil || !strings.Contains(err.Error(), "nil *core.Locker") {
			t.Fatalf("New(nil) = %v, want an error naming the nil Locker", err)
		}
	})
}

// TestRulesLoaded: the annotated methods of the registry are locked, the
// unannotated are not; a Go rule fixes a bad annotation (it wins, so the
// annotation is not even checked); dynamic descriptors work through
// WithFiles.
func TestRulesLoaded(t *testing.T) {
	e := newBase(t)
	lk, err := grpclock.New(e.Locker)
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
	if _, err := grpclock.New(e.Locker, grpclock.WithFiles(files)); err == nil {
		t.Fatal("New with a client stream naming a field: no error")
	}
	lk, err = grpclock.New(e.Locker, grpclock.WithFiles(files),
		grpclock.WithRule("/dyn.S/ClientStream", grpclock.Rule{Key: "k:{md.x-user-id}", Options: []core.LockOption{core.WithWait(core.NoWait)}}))
	if err != nil {
		t.Fatalf("New with a Go rule over the bad annotation: %v", err)
	}
	got = lk.Methods()
	slices.Sort(got)
	if want := []string{"/dyn.S/Bidi", "/dyn.S/ClientStream", "/dyn.S/Unary"}; !slices.Equal(got, want) {
		t.Fatalf("locked methods %v, want %v", got, want)
	}
}
