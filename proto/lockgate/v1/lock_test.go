package lockgatev1_test

import (
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	lockgatev1 "github.com/lockgate/lockgate/proto/lockgate/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExtensionRegistered checks that the generated code registers the
// extension under its documented name, number and extendee, and the file
// under the import path users write.
func TestExtensionRegistered(t *testing.T) {
	xt, err := protoregistry.GlobalTypes.FindExtensionByName("lockgate.v1.lock")
	if err != nil {
		t.Fatalf("extension lockgate.v1.lock not registered: %v", err)
	}
	xd := xt.TypeDescriptor()
	if got := xd.Number(); got != 51637 {
		t.Errorf("field number = %d, want 51637 (documented in lock.proto and doc.go)", got)
	}
	if got := xd.ContainingMessage().FullName(); got != "google.protobuf.MethodOptions" {
		t.Errorf("extendee = %s, want google.protobuf.MethodOptions", got)
	}
	if xd.Message().FullName() != (&lockgatev1.LockRule{}).ProtoReflect().Descriptor().FullName() {
		t.Errorf("extension type = %s, want LockRule", xd.Message().FullName())
	}
	if _, err := protoregistry.GlobalFiles.FindFileByPath("lockgate/v1/lock.proto"); err != nil {
		t.Errorf("file not registered as lockgate/v1/lock.proto: %v", err)
	}
	fields := xd.Message().Fields()
	for name, kind := range map[protoreflect.Name]protoreflect.Kind{
		"key": protoreflect.StringKind, "wait": protoreflect.StringKind,
		"ttl": protoreflect.StringKind, "fail_open": protoreflect.BoolKind,
	} {
		f := fields.ByName(name)
		if f == nil || f.Kind() != kind {
			t.Errorf("LockRule.%s: got %v, want a %v field", name, f, kind)
		}
	}
}
