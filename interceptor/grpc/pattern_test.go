package grpclock_test

import (
	"testing"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/interceptor/grpc/internal/testpb"
	"github.com/lockgate/lockgate/internal/locktest"
)

// A method's lock events name its annotation's key template, not the key.
func TestEventsNameTheAnnotationKey(t *testing.T) {
	rec := &locktest.Patterns{}
	e := newEnvOn(t, newBase(t, core.WithObserver(rec)))
	if _, err := e.client.Order(testCtx(t), &testpb.OrderRequest{UserId: "u1", VoucherId: 7}); err != nil {
		t.Fatal(err)
	}
	if msg := rec.Check("order:", "order:{user_id}:{voucher_id}"); msg != "" {
		t.Fatal(msg)
	}
}
