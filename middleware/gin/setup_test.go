package ginlock_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/gin"
	"github.com/lockgate/lockgate/redistest"
)

// TestSetupErrors: every bad Locker, template and option is an error of New
// (and NewTemplate) naming what is wrong, with fail-open on — before and
// after the bad option — so that it can neither answer 503 to every
// request nor run them all without the lock; Must panics with it. The
// control: the same route with good values of every option serves 200
// under the lock.
func TestSetupErrors(t *testing.T) {
	srv := redistest.Start(t)
	l := newLocker(t, srv)
	const key = "order:{query.user_id}:{path.voucher}"
	cases := []struct {
		name   string
		locker *core.Locker
		key    string
		tmpl   *keyfunc.Template // NewTemplate when set (or when nilT)
		nilT   bool
		opts   []ginlock.Option
		want   error
		names  string // the error text must contain it
	}{
		{name: "nil Locker", key: key, want: ginlock.ErrNoLocker, names: "Locker"},
		{name: "nil Locker, NewTemplate", tmpl: keyfunc.MustCompile(key), want: ginlock.ErrNoLocker, names: "Locker"},
		{name: "empty key", locker: l, key: "", want: keyfunc.ErrBadTemplate},
		{name: "unbalanced brace", locker: l, key: "order:{query.id", want: keyfunc.ErrBadTemplate},
		{name: "gRPC source", locker: l, key: "order:{field.id}", want: keyfunc.ErrBadTemplate},
		{name: "gRPC metadata", locker: l, key: "order:{md.x}", want: keyfunc.ErrBadTemplate},
		{name: "unknown source", locker: l, key: "o:{usr.id}", want: keyfunc.ErrBadTemplate},
		{name: "unknown type", locker: l, key: "o:{query.id:float}", want: keyfunc.ErrBadTemplate},
		{name: "gRPC template", locker: l, tmpl: keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.Field("id")), want: keyfunc.ErrBadTemplate},
		{name: "nil template", locker: l, nilT: true, want: keyfunc.ErrBadTemplate},
		{name: "TTL below minimum", locker: l, key: key, opts: []ginlock.Option{ginlock.WithTTL(10 * time.Millisecond)}, want: core.ErrInvalid, names: "WithTTL"},
		{name: "TTL just below minimum", locker: l, key: key, opts: []ginlock.Option{ginlock.WithTTL(core.MinTTL - 1)}, want: core.ErrInvalid, names: "WithTTL"},
		{name: "negative TTL", locker: l, key: key, opts: []ginlock.Option{ginlock.WithTTL(-time.Second)}, want: core.ErrInvalid, names: "WithTTL"},
		{name: "negative wait", locker: l, key: key, opts: []ginlock.Option{ginlock.WithWait(-2 * time.Second)}, want: core.ErrInvalid, names: "WithWait"},
		{name: "wait -2ns", locker: l, key: key, opts: []ginlock.Option{ginlock.WithWait(core.NoWait - 1)}, want: core.ErrInvalid, names: "WithWait"},
		{name: "negative release timeout", locker: l, key: key, opts: []ginlock.Option{ginlock.WithReleaseTimeout(-time.Millisecond)}, want: core.ErrInvalid, names: "WithReleaseTimeout"},
		{name: "negative body size", locker: l, key: "o:{body.id}", opts: []ginlock.Option{ginlock.WithMaxBodySize(-1)}, want: core.ErrInvalid, names: "WithMaxBodySize"},
		{name: "nil lock option", locker: l, key: key, opts: []ginlock.Option{ginlock.WithLockOptions(core.WithoutWatchdog(), nil)}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "core TTL below minimum", locker: l, key: key, opts: []ginlock.Option{ginlock.WithLockOptions(core.WithTTL(time.Millisecond))}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "core negative wait", locker: l, key: key, opts: []ginlock.Option{ginlock.WithLockOptions(core.WithWait(-5 * time.Second))}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "core zero release timeout", locker: l, key: key, opts: []ginlock.Option{ginlock.WithLockOptions(core.WithReleaseTimeout(0))}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "nil option", locker: l, key: key, opts: []ginlock.Option{nil}, want: core.ErrInvalid, names: "nil"},
		{name: "bad option after good ones", locker: l, key: key, opts: []ginlock.Option{ginlock.WithWait(time.Second), ginlock.WithTTL(time.Second), ginlock.WithTTL(time.Nanosecond)}, want: core.ErrInvalid, names: "WithTTL"},
	}
	for _, c := range cases {
		for _, order := range []string{"fail-open first", "fail-open last"} {
			t.Run(c.name+"/"+order, func(t *testing.T) {
				opts := append([]ginlock.Option{ginlock.WithFailOpen()}, c.opts...)
				if order == "fail-open last" {
					opts = append(append([]ginlock.Option(nil), c.opts...), ginlock.WithFailOpen())
				}
				build := func() (gin.HandlerFunc, error) {
					if c.tmpl != nil || c.nilT {
						return ginlock.NewTemplate(c.locker, c.tmpl, opts...)
					}
					return ginlock.New(c.locker, c.key, opts...)
				}
				h, err := build()
				if !errors.Is(err, c.want) || h != nil {
					t.Fatalf("error %v (handler %v), want one matching %v and no handler", err, h != nil, c.want)
				}
				if !strings.Contains(err.Error(), c.names) {
					t.Fatalf("error %q does not name %q", err, c.names)
				}
				if v, _ := locktest.Panics(func() { ginlock.Must(build()) }).(error); !errors.Is(v, c.want) {
					t.Fatalf("Must panicked with %v, want %v", v, err)
				}
			})
		}
	}

	t.Run("control: good values serve 200 under the lock", func(t *testing.T) {
		type seen struct {
			key  string
			held bool
		}
		got := make(chan seen, 1)
		rc := srv.Client(t)
		h := ginlock.Must(ginlock.New(l, "order:{query.user_id:int}:{path.voucher}",
			ginlock.WithFailOpen(),
			ginlock.WithTTL(core.MinTTL), ginlock.WithTTL(0), // 0 sets nothing
			ginlock.WithWait(core.NoWait), ginlock.WithWait(0),
			ginlock.WithReleaseTimeout(time.Second), ginlock.WithReleaseTimeout(0),
			ginlock.WithMaxBodySize(0), ginlock.WithMaxBodySize(1),
			ginlock.WithLockOptions(core.WithReleaseTimeout(time.Second), core.WithWatchdog()),
			ginlock.WithLockOptions(),
			// nil keeps each default
			ginlock.WithBusyHandler(nil), ginlock.WithErrorHandler(nil), ginlock.WithLogger(nil),
			ginlock.WithSkip(nil), ginlock.WithContextValue(nil)))
		e := newEngine()
		e.POST("/seckill/:voucher", h, func(c *gin.Context) {
			lease := ginlock.FromGin(c)
			n, err := rc.Exists(c.Request.Context(), locktest.RedisKey(lease.Key())).Result()
			got <- seen{lease.Key(), err == nil && n == 1}
		})
		s := serve(t, e)
		r := s.do(locktest.Context(t), "POST", "/seckill/7?user_id=042", "", "")
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
		}
		if s := <-got; s.key != "order:42:7" || !s.held {
			t.Fatalf("handler saw %+v, want the lease order:42:7 held in Redis", s)
		}
	})
}

// TestLockerOnlyOptionDoesNotCompile: a Locker-only core option
// (core.WithPrefix) cannot be given to WithLockOptions: it is a compile
// error, not a setup or request-time one. The control, a per-call option
// in the same place, compiles.
func TestLockerOnlyOptionDoesNotCompile(t *testing.T) {
	if out, err := locktest.Build(t, "testdata/lockeronly_good.go"); err != nil {
		t.Fatalf("control does not compile: %v\n%s", err, out)
	}
	out, err := locktest.Build(t, "testdata/lockeronly_bad.go")
	if err == nil {
		t.Fatal("a Locker-only option compiled as a lock option")
	}
	if !strings.Contains(out, "core.LockOption") {
		t.Fatalf("compile error does not name core.LockOption:\n%s", out)
	}
}
