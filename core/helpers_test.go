package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// newLocker returns a Locker with its own client to srv, closed at cleanup.
func newLocker(t testing.TB, srv *redistest.Server, opts ...core.Option) (*core.Locker, *redis.Client) {
	t.Helper()
	c := srv.Client(t)
	return lockerOn(t, c, opts...), c
}

// lockerOn returns a Locker on c, closed at cleanup.
func lockerOn(t testing.TB, c redis.UniversalClient, opts ...core.Option) *core.Locker {
	t.Helper()
	l, err := core.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// within fails the test if ch does not close within d.
func within(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s did not happen within %v", what, d)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
