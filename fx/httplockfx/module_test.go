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

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/lockgate/lockgate/fx/httplockfx"
	"github.com/lockgate/lockgate/fx/lockfx"
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
		fx.Supply(fx.Annotate(client, fx.As(new(redis.UniversalClient)))),
		lockfx.Module,
		httplockfx.Options(httplock.WithWait(0)),
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

// TestFactoryWithoutFx: the Factory works without fx; a bad template is an
// error of New.
func TestFactoryWithoutFx(t *testing.T) {
	f := httplockfx.NewFactory(httplockfx.Params{})
	if _, err := f.New("order:{query.user}"); err == nil {
		t.Fatal("New with no Locker: no error")
	}
}
