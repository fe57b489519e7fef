package httplock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/middleware/nethttp"
	"github.com/lockgate/lockgate/redistest"
)

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

	order := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lease := httplock.FromContext(r.Context()) // r.Context() is the lease's context
		fmt.Fprintf(w, "locked %s", lease.Key())
	})
	mux := http.NewServeMux()
	lock := httplock.Must(httplock.New(locker, "order:{query.user_id}:{path.voucher}")) // a bad key or option panics here, at setup
	mux.Handle("POST /voucher-order/seckill/{voucher}", lock(order))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, q := range []string{"?user_id=42", ""} {
		resp, err := srv.Client().Post(srv.URL+"/voucher-order/seckill/7"+q, "", nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 locked order:42:7
	// 400 {"error":"query.user_id: missing or empty value"}
}

// At most 2 exports per tenant at once: the first two requests of tenant
// acme are inside, the third waits its second and is answered 429.
func ExampleWithLimit() {
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

	inside, release := make(chan struct{}), make(chan struct{})
	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-release
		fmt.Fprintf(w, "exported under %s", httplock.FromContext(r.Context()).Key())
	})
	mux := http.NewServeMux()
	limit := httplock.Must(httplock.New(locker, "export:{query.tenant}", httplock.WithLimit(2), httplock.WithWait(time.Second)))
	mux.Handle("POST /exports", limit(export))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func() string {
		resp, err := srv.Client().Post(srv.URL+"/exports?tenant=acme", "", nil)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(body)))
	}
	answers := make(chan string, 2)
	for range 2 {
		go func() { answers <- post() }()
		select {
		case <-inside:
		case a := <-answers:
			fmt.Println("not let in:", a)
			close(release)
			return
		}
	}
	fmt.Println(post()) // a third while two are inside
	close(release)
	fmt.Println(<-answers)
	fmt.Println(<-answers)
	// Output:
	// 429 {"error":"resource is busy, retry later"}
	// 200 exported under export:acme
	// 200 exported under export:acme
}
