package rpcsuite

import "testing"

// TestGoName: GoName finds Go's type and package names in the forms they
// take in error text (connect's and grpc-go's decoding errors, a Go
// error's %T or %#v), and none in the suite's answers and logs, whose full
// method names are protobuf's.
func TestGoName(t *testing.T) {
	for _, s := range []string{
		"unmarshal message: unmarshal into *seckillv1.OrderRequest: proto: (line 1:15): invalid value",
		"unmarshal message: unmarshal into *testpb.OrderRequest: proto:\u00a0cannot parse invalid wire-format data",
		"grpc: failed to unmarshal the received message: proto: cannot parse invalid wire-format data",
		"protojson: syntax error",
		"dial failed: &net.OpError{Op:\"dial\"}",
		"lockgate: unexpected *redis.Client",
		"at github.com/lockgate/lockgate/core",
		"panic at locker.go:42",
	} {
		if GoName(s) == "" {
			t.Errorf("GoName(%q) found nothing", s)
		}
	}
	for _, s := range []string{
		"/lockgate.testpb.Orders/Order: lock service unavailable, please retry later",
		"/pkg.S/M is busy: another call holds its lock, please retry later",
		"/lockgate.testpb.Orders/Nested: invalid lock key: field.item.sku: missing or empty value",
		"unmarshal message: invalid request body: field voucherId",
		`level=ERROR msg="grpclock: redis unavailable" method=/lockgate.testpb.Orders/Order error="lockgate: redis unavailable: acquire: dial tcp 127.0.0.1:6379: connect: connection refused (a probe dial, while the call waited)"`,
		"context deadline exceeded",
	} {
		if name := GoName(s); name != "" {
			t.Errorf("GoName(%q) = %q, want none", s, name)
		}
	}
}
