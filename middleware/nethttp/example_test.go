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

// The readers of a voucher run together, its restock alone: two GETs of
// voucher 7 are inside at once, and a PUT of its restock, waiting its
// second meanwhile, is answered 429; once they are out it is served.
func ExampleWithShared() {
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
	show := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-release
		fmt.Fprintf(w, "read under %s", httplock.FromContext(r.Context()).Key())
	})
	restock := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "restocked under %s", httplock.FromContext(r.Context()).Key())
	})
	mux := http.NewServeMux()
	const key = "voucher:{path.id}"
	mux.Handle("GET /vouchers/{id}", httplock.Must(httplock.New(locker, key, httplock.WithShared()))(show))
	mux.Handle("PUT /vouchers/{id}/restock", httplock.Must(httplock.New(locker, key, httplock.WithWait(time.Second)))(restock))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(method, path string) string {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(body)))
	}
	answers := make(chan string, 2)
	for range 2 {
		go func() { answers <- send("GET", "/vouchers/7") }()
		select {
		case <-inside:
		case a := <-answers:
			fmt.Println("not let in:", a)
			close(release)
			return
		}
	}
	fmt.Println(send("PUT", "/vouchers/7/restock")) // while two readers are inside
	close(release)
	fmt.Println(<-answers)
	fmt.Println(<-answers)
	fmt.Println(send("PUT", "/vouchers/7/restock"))
	// Output:
	// 429 {"error":"resource is busy, retry later"}
	// 200 read under voucher:7
	// 200 read under voucher:7
	// 200 restocked under voucher:7
}
