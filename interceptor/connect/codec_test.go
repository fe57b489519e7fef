package connectlock_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	connectlock "github.com/lockgate/lockgate/interceptor/connect"
)

// TestPlainCodecsNameNoGoType: a body that does not decode is
// ErrInvalidBody naming the field, with no Go type or package name; the
// control is a valid body, which decodes.
func TestPlainCodecsNameNoGoType(t *testing.T) {
	var got []string
	for _, c := range connectlock.PlainCodecsForTest() {
		var d descriptorpb.FieldDescriptorProto
		bad := []byte(`{"number": "x"}`)
		if c.Name() == "proto" {
			bad = []byte{0xff, 0xff, 0xff}
		}
		err := c.Unmarshal(bad, &d)
		if !errors.Is(err, connectlock.ErrInvalidBody) {
			t.Fatalf("%s: %v, want ErrInvalidBody", c.Name(), err)
		}
		if strings.Contains(err.Error(), "*") || strings.Contains(err.Error(), "descriptorpb") || strings.Contains(err.Error(), "proto:") {
			t.Errorf("%s: %q names a Go type or package", c.Name(), err)
		}
		got = append(got, err.Error())
		good, _ := c.Marshal(&descriptorpb.FieldDescriptorProto{Number: proto.Int32(3)})
		if err := c.Unmarshal(good, &d); err != nil || d.GetNumber() != 3 {
			t.Errorf("%s control: %v %v", c.Name(), err, d.GetNumber())
		}
	}
	if got[1] != "invalid request body: field number" {
		t.Errorf("json text %q, want it to name the field", got[1])
	}
}
