package ginlock_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/middleware/gin"
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

	r := gin.New()
	r.Use(gin.Recovery())
	lock := ginlock.Must(ginlock.New(locker, "order:{query.user_id}:{path.voucher}")) // a bad key or option panics here, at setup
	r.POST("/voucher-order/seckill/:voucher", lock, func(c *gin.Context) {
		ctx := c.Request.Context() // the lease's context: pass it on (c itself only with ContextWithFallback)
		lease := ginlock.FromContext(ctx)
		c.String(http.StatusOK, "locked %s", lease.Key())
	})

	srv := httptest.NewServer(r)
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
