package echolock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	echolock "github.com/lockgate/lockgate/middleware/echov5"
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

	e := echo.New()
	e.Use(middleware.Recover())
	// A bad key or field is an error here, at setup; Must panics with it.
	lock := echolock.Must(echolock.NewWithConfig(echolock.Config{
		Locker: locker,
		Key:    "order:{query.user_id:int}:{path.voucher}",
	}))
	e.POST("/voucher-order/seckill/:voucher", func(c *echo.Context) error {
		lease := echolock.FromContext(c.Request().Context()) // the request's context is the lease's
		return c.String(http.StatusOK, "locked "+lease.Key())
	}, lock)

	srv := httptest.NewServer(e)
	defer srv.Close()
	for _, q := range []string{"?user_id=042", ""} {
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
