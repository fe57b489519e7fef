package chilock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

// A chi route locked per user and voucher, with the lock inline (With);
// the same lock given to Use in a group runs before {voucher} exists.
func Example() {
	rs, err := redistest.NewServer() // your Redis in production
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rs.Close()
	client := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer client.Close()
	locker, err := core.New(client)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	order := func(w http.ResponseWriter, r *http.Request) {
		lease := httplock.FromContext(r.Context()) // r.Context() is the lease's context
		fmt.Fprintf(w, "locked %s", lease.Key())
	}
	lock := httplock.Must(httplock.New(locker, "order:{query.user_id}:{path.voucher}"))
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.With(lock).Post("/voucher-order/seckill/{voucher}", order)
	r.Route("/pitfall", func(g chi.Router) {
		g.Use(lock) // wrong: runs before "/{voucher}" is matched
		g.Post("/{voucher}", order)
	})

	srv := httptest.NewServer(r)
	defer srv.Close()
	for _, path := range []string{"/voucher-order/seckill/7?user_id=42", "/voucher-order/seckill/7", "/pitfall/7?user_id=42"} {
		resp, err := srv.Client().Post(srv.URL+path, "", nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	}
	// Output:
	// 200 locked order:42:7
	// 400 {"error":"query.user_id: missing or empty value"}
	// 500 {"error":"internal server error"}
}
