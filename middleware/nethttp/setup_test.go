package httplock_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// TestSetupErrors: every bad Locker, template and option is an error of New
// (and NewTemplate), with fail-open on — before and after the bad option —
// so that it can neither answer 503 to every request nor run them all
// without the lock; Must panics with it. The control: the same route with
// good values of every option serves 200 under the lock.
func TestSetupErrors(t *testing.T) {
	srv := redistest.Start(t)
	l, _ := locktest.NewLocker(t, srv)
	const key = "order:{query.user_id}:{path.voucher}"
	cases := []struct {
		name   string
		locker *core.Locker
		key    string
		tmpl   *keyfunc.Template // NewTemplate when set (or when nilTmpl)
		nilT   bool
		opts   []httplock.Option
		want   error
		names  string // the error text must contain it
	}{
		{name: "nil Locker", key: key, want: httplock.ErrNoLocker, names: "Locker"},
		{name: "nil Locker, NewTemplate", tmpl: keyfunc.MustCompile(key), want: httplock.ErrNoLocker, names: "Locker"},
		{name: "empty key", locker: l, key: "", want: keyfunc.ErrBadTemplate},
		{name: "unbalanced brace", locker: l, key: "order:{query.id", want: keyfunc.ErrBadTemplate},
		{name: "gRPC source", locker: l, key: "order:{field.id}", want: keyfunc.ErrBadTemplate},
		{name: "gRPC metadata", locker: l, key: "order:{md.x}", want: keyfunc.ErrBadTemplate},
		{name: "unknown source", locker: l, key: "o:{usr.id}", want: keyfunc.ErrBadTemplate},
		{name: "unknown type", locker: l, key: "o:{query.id:float}", want: keyfunc.ErrBadTemplate},
		{name: "gRPC template", locker: l, tmpl: keyfunc.MustJoin(keyfunc.Const("o"), keyfunc.Field("id")), want: keyfunc.ErrBadTemplate},
		{name: "nil template", locker: l, nilT: true, want: keyfunc.ErrBadTemplate},
		{name: "TTL below minimum", locker: l, key: key, opts: []httplock.Option{httplock.WithTTL(10 * time.Millisecond)}, want: core.ErrInvalid, names: "WithTTL"},
		{name: "TTL just below minimum", locker: l, key: key, opts: []httplock.Option{httplock.WithTTL(core.MinTTL - 1)}, want: core.ErrInvalid, names: "WithTTL"},
		{name: "negative TTL", locker: l, key: key, opts: []httplock.Option{httplock.WithTTL(-time.Second)}, want: core.ErrInvalid, names: "WithTTL"},
		{name: "negative wait", locker: l, key: key, opts: []httplock.Option{httplock.WithWait(-2 * time.Second)}, want: core.ErrInvalid, names: "WithWait"},
		{name: "wait -2ns", locker: l, key: key, opts: []httplock.Option{httplock.WithWait(core.NoWait - 1)}, want: core.ErrInvalid, names: "WithWait"},
		{name: "negative release timeout", locker: l, key: key, opts: []httplock.Option{httplock.WithReleaseTimeout(-time.Millisecond)}, want: core.ErrInvalid, names: "WithReleaseTimeout"},
		{name: "negative body size", locker: l, key: "o:{body.id}", opts: []httplock.Option{httplock.WithMaxBodySize(-1)}, want: core.ErrInvalid, names: "WithMaxBodySize"},
		{name: "nil lock option", locker: l, key: key, opts: []httplock.Option{httplock.WithLockOptions(core.WithoutWatchdog(), nil)}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "core TTL below minimum", locker: l, key: key, opts: []httplock.Option{httplock.WithLockOptions(core.WithTTL(time.Millisecond))}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "core negative wait", locker: l, key: key, opts: []httplock.Option{httplock.WithLockOptions(core.WithWait(-5 * time.Second))}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "core zero release timeout", locker: l, key: key, opts: []httplock.Option{httplock.WithLockOptions(core.WithReleaseTimeout(0))}, want: core.ErrInvalid, names: "WithLockOptions"},
		{name: "nil option", locker: l, key: key, opts: []httplock.Option{nil}, want: core.ErrInvalid, names: "nil"},
		{name: "bad option after good ones", locker: l, key: key, opts: []httplock.Option{httplock.WithWait(time.Second), httplock.WithTTL(time.Second), httplock.WithTTL(time.Nanosecond)}, want: core.ErrInvalid, names: "WithTTL"},
	}
	for _, c := range cases {
		for _, order := range []string{"fail-open first", "fail-open last"} {
			t.Run(c.name+"/"+order, func(t *testing.T) {
				opts := append([]httplock.Option{httplock.WithFailOpen()}, c.opts...)
				if order == "fail-open last" {
					opts = append(append([]httplock.Option(nil), c.opts...), httplock.WithFailOpen())
				}
				build := func() (func(http.Handler) http.Handler, error) {
					if c.tmpl != nil || c.nilT {
						return httplock.NewTemplate(c.locker, c.tmpl, opts...)
					}
					return httplock.New(c.locker, c.key, opts...)
				}
				mw, err := build()
				if !errors.Is(err, c.want) || mw != nil {
					t.Fatalf("error %v (middleware %v), want one matching %v and no middleware", err, mw != nil, c.want)
				}
				if !strings.Contains(err.Error(), c.names) {
					t.Fatalf("error %q does not name %q", err, c.names)
				}
				if v, _ := locktest.Panics(func() { httplock.Must(build()) }).(error); !errors.Is(v, c.want) {
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
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			lease := httplock.FromContext(r.Context())
			n, err := rc.Exists(r.Context(), locktest.RedisKey(lease.Key())).Result()
			got <- seen{lease.Key(), err == nil && n == 1}
		})
		mw, err := httplock.New(l, "order:{query.user_id:int}:{path.voucher}",
			httplock.WithFailOpen(),
			httplock.WithTTL(core.MinTTL), httplock.WithTTL(0), // 0 sets nothing
			httplock.WithWait(core.NoWait), httplock.WithWait(0),
			httplock.WithReleaseTimeout(time.Second), httplock.WithReleaseTimeout(0),
			httplock.WithMaxBodySize(0), httplock.WithMaxBodySize(1),
			httplock.WithLockOptions(core.WithReleaseTimeout(time.Second), core.WithWatchdog()),
			httplock.WithLockOptions(),
			// nil keeps each default
			httplock.WithBusyHandler(nil), httplock.WithErrorHandler(nil), httplock.WithLogger(nil),
			httplock.WithPathValue(nil), httplock.WithContextValue(nil))
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /seckill/{voucher}", mw(h))
		ts, _ := serve(t, mux)
		r := locktest.Do(locktest.Context(t), ts.Client(), "POST", ts.URL+"/seckill/7?user_id=042", "", "")
		if r.Err != nil || r.Status != http.StatusOK {
			t.Fatalf("status %d %v %s", r.Status, r.Err, r.Body)
		}
		if s := <-got; s.key != "order:42:7" || !s.held {
			t.Fatalf("handler saw %+v, want the lease order:42:7 held in Redis", s)
		}
	})
}

// TestLockerOnlyOptionDoesNotCompile: a Locker-only core option
// (core.WithPrefix) cannot be given as a per-route lock option: it is a
// compile error, not a setup or request-time one. The control, a per-call
// option in the same place, compiles.
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
