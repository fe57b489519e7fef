package httplockfx_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/fx/httplockfx"
	"github.com/lockgate/lockgate/internal/fxlocktest"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/keyfunc"
	httplock "github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// leaseKey answers the key of the lease the handler runs under ("" when
// none).
var leaseKey = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, httplock.FromContext(r.Context()).Key())
})

type server struct{ url string }

// newServer serves a locked route and the same handler unlocked (the
// control) on 127.0.0.1:0 for the fx lifecycle.
func newServer(lc fx.Lifecycle, f *httplockfx.Factory) *server {
	mux := http.NewServeMux()
	mux.Handle("POST /order/{voucher}", f.Must("order:{query.user}:{path.voucher}")(leaseKey))
	mux.Handle("POST /plain/{voucher}", leaseKey)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s := &server{}
	served := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			s.url = "http://" + lis.Addr().String()
			go func() {
				defer close(served)
				if err := hs.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
					panic(err)
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			err := hs.Shutdown(ctx)
			<-served
			return err
		},
	})
	return s
}

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Post(url, "text/plain", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestModule: start, a request through the locked route runs under the
// lease (the control route does not), a bad request is 400, stop; nothing
// leaks (TestMain).
func TestModule(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	var s *server
	app := fxtest.New(t,
		fxlocktest.FxLocker(client),
		httplockfx.Options(httplock.WithWait(core.NoWait)),
		httplockfx.Module,
		fx.Provide(newServer),
		fx.Populate(&s),
	)
	app.RequireStart()
	if code, body := post(t, s.url+"/order/7?user=u1"); code != http.StatusOK || body != "order:u1:7" {
		t.Fatalf("locked route: %d %q, want 200 with the lease key order:u1:7", code, body)
	}
	if code, body := post(t, s.url+"/plain/7?user=u1"); code != http.StatusOK || body != "" {
		t.Fatalf("control route: %d %q, want 200 without a lease", code, body)
	}
	if code, body := post(t, s.url+"/order/7"); code != http.StatusBadRequest || !strings.Contains(body, "query.user") {
		t.Fatalf("locked route without user: %d %q, want 400 naming query.user", code, body)
	}
	app.RequireStop()
}

// TestFactoryWithoutFx: the Factory works without fx; a nil Locker is an
// error of NewFactory, a bad template an error of New.
func TestFactoryWithoutFx(t *testing.T) {
	if f, err := httplockfx.NewFactory(httplockfx.Params{}); !errors.Is(err, httplock.ErrNoLocker) || f != nil {
		t.Fatalf("NewFactory with no Locker: %v, want ErrNoLocker", err)
	}
	if _, err := (&httplockfx.Factory{}).New("order:{query.user}"); !errors.Is(err, httplock.ErrNoLocker) {
		t.Fatalf("zero Factory: %v, want ErrNoLocker", err)
	}
	srv := redistest.Start(t)
	l := locktest.Locker(t, srv.Client(t))
	f, err := httplockfx.NewFactory(httplockfx.Params{Locker: l, Options: []httplock.Option{httplock.WithFailOpen()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.New("order:{query.user"); !errors.Is(err, keyfunc.ErrBadTemplate) {
		t.Fatalf("bad template: %v", err)
	}
	if _, err := f.New("order:{query.user}", httplock.WithTTL(time.Millisecond)); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("bad route option: %v", err)
	}
}

// TestBadDefaults: a bad module-wide option (with fail-open among the
// defaults) fails the application's start, naming the option — it never
// reaches a route or a request. The control: good defaults start and serve
// under the lock.
func TestBadDefaults(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	cases := []struct {
		name  string
		opt   httplock.Option
		names string
	}{
		{"TTL below minimum", httplock.WithTTL(time.Millisecond), "WithTTL"},
		{"negative wait", httplock.WithWait(-2 * time.Second), "WithWait"},
		{"negative release timeout", httplock.WithReleaseTimeout(-time.Second), "WithReleaseTimeout"},
		{"negative body size", httplock.WithMaxBodySize(-1), "WithMaxBodySize"},
		{"invalid core option", httplock.WithLockOptions(core.WithTTL(time.Millisecond)), "WithLockOptions"},
		{"nil core option", httplock.WithLockOptions(nil), "WithLockOptions"},
		{"nil option", nil, "nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := fx.New(fx.NopLogger,
				fxlocktest.FxLocker(client),
				httplockfx.Options(httplock.WithFailOpen(), c.opt),
				httplockfx.Module,
				fx.Invoke(func(*httplockfx.Factory) {}),
			)
			err := app.Start(locktest.Context(t))
			if err == nil {
				app.Stop(locktest.Context(t))
				t.Fatal("started with a bad default option")
			}
			if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "httplockfx") {
				t.Fatalf("start error %v, want one matching core.ErrInvalid naming %s", err, c.names)
			}
		})
	}
	t.Run("control: good defaults", func(t *testing.T) {
		var s *server
		app := fxtest.New(t,
			fxlocktest.FxLocker(client),
			httplockfx.Options(httplock.WithFailOpen(), httplock.WithTTL(core.MinTTL), httplock.WithWait(core.NoWait),
				httplock.WithReleaseTimeout(time.Second), httplock.WithMaxBodySize(1)),
			httplockfx.Module,
			fx.Provide(newServer),
			fx.Populate(&s),
		)
		app.RequireStart()
		defer app.RequireStop()
		if code, body := post(t, s.url+"/order/7?user=u1"); code != http.StatusOK || body != "order:u1:7" {
			t.Fatalf("locked route: %d %q, want 200 with the lease key order:u1:7", code, body)
		}
	})
}
