package rpclock_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/lockgate/lockgate/internal/rpclock"
	_ "github.com/lockgate/lockgate/internal/rpcsuite/testpb" // registers testpb/order.proto
	lockgatev1 "github.com/lockgate/lockgate/proto/lockgate/v1"
)

// TestLimitCompiled: an annotation's limit and a Go rule's Limit reach the
// compiled method; the control, an annotation without one, compiles to
// the lock (Limit 0).
func TestLimitCompiled(t *testing.T) {
	files := annotatedFiles(t, map[string]*lockgatev1.LockRule{
		"Limited": {Key: "export:{user_id}", Limit: 3},
		"Locked":  {Key: "order:{user_id}"},
		"ByRule":  {Key: "order:{user_id}"},
	})
	methods, err := rpclock.Load(&rpclock.Config{
		Name:  "test",
		Files: files,
		Rules: map[string]rpclock.Rule{"/dyn.S/ByRule": {Key: "export:{user_id}", Limit: 2}},
		Order: []string{"/dyn.S/ByRule"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"/dyn.S/Limited": 3, "/dyn.S/Locked": 0, "/dyn.S/ByRule": 2} {
		if m := methods[name]; m == nil || m.Limit != want {
			t.Errorf("%s: %+v, want Limit %d", name, m, want)
		}
	}
}

// annotatedFiles is a registry with a file "dyn/dyn.proto" whose service
// dyn.S has one unary method of the test service's messages per entry of
// rules, annotated with it.
func annotatedFiles(t *testing.T, rules map[string]*lockgatev1.LockRule) *protoregistry.Files {
	t.Helper()
	svc := &descriptorpb.ServiceDescriptorProto{Name: proto.String("S")}
	for name, lr := range rules {
		opts := &descriptorpb.MethodOptions{}
		proto.SetExtension(opts, lockgatev1.E_Lock, lr)
		svc.Method = append(svc.Method, &descriptorpb.MethodDescriptorProto{
			Name:       proto.String(name),
			InputType:  proto.String(".lockgate.testpb.OrderRequest"),
			OutputType: proto.String(".lockgate.testpb.OrderReply"),
			Options:    opts,
		})
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String("dyn/dyn.proto"),
		Package:    proto.String("dyn"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"testpb/order.proto"},
		Service:    []*descriptorpb.ServiceDescriptorProto{svc},
	}, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	files := &protoregistry.Files{}
	if err := files.RegisterFile(fd); err != nil {
		t.Fatal(err)
	}
	return files
}
