package rpclock_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
)

// TestHandOn: the request a server-streaming interceptor received reaches
// the handler's message whole, whether it is of the same Go type (a merge
// over a reset: nothing of dst survives) or a dynamic one (through the
// wire format); a destination that is not a proto.Message is ErrNotProto.
func TestHandOn(t *testing.T) {
	first := &testpb.OrderRequest{UserId: "u1", VoucherId: 7, Item: &testpb.Item{Sku: "s1"}}

	same := &testpb.OrderRequest{UserId: "stale", PauseMs: 9}
	if err := rpclock.HandOn(same, first); err != nil || !proto.Equal(same, first) {
		t.Fatalf("same type: %v, %v; want %v", same, err, first)
	}

	dyn := dynamicpb.NewMessage(first.ProtoReflect().Descriptor())
	if err := rpclock.HandOn(dyn, first); err != nil {
		t.Fatalf("dynamic: %v", err)
	}
	b, err := proto.Marshal(dyn)
	if err != nil {
		t.Fatal(err)
	}
	var back testpb.OrderRequest
	if err := proto.Unmarshal(b, &back); err != nil || !proto.Equal(&back, first) {
		t.Fatalf("dynamic copy reads back as %v, %v; want %v", &back, err, first)
	}

	// Another descriptor of the same message (loaded at run time): the
	// copy goes through the wire format.
	fd, err := protodesc.NewFile(protodesc.ToFileDescriptorProto(testpb.File_testpb_order_proto), nil)
	if err != nil {
		t.Fatal(err)
	}
	other := dynamicpb.NewMessage(fd.Messages().ByName("OrderRequest"))
	if other.Descriptor() == first.ProtoReflect().Descriptor() {
		t.Fatal("the run-time descriptor is the generated one")
	}
	if err := rpclock.HandOn(other, first); err != nil {
		t.Fatalf("another descriptor: %v", err)
	}
	if got := other.Get(other.Descriptor().Fields().ByName("user_id")).String(); got != "u1" {
		t.Fatalf("another descriptor: user_id %q, want u1", got)
	}

	if err := rpclock.HandOn(struct{}{}, first); !errors.Is(err, rpclock.ErrNotProto) {
		t.Fatalf("non-proto destination: %v, want ErrNotProto", err)
	}
}
