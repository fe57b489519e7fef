package fiberlock_test

import (
	"fmt"
	"io"
	"net/http/httptest"

	"github.com/gofiber/fiber/v3"
	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	fiberlock "github.com/lockgate/lockgate/middleware/fiberv3"
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
	l, err := core.New(client)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	app := fiber.New()
	app.Post("/voucher-order/seckill/:voucher",
		fiberlock.New(fiberlock.Config{Locker: l, Key: "order:{query.user_id}:{path.voucher}"}),
		func(c fiber.Ctx) error {
			lease := fiberlock.FromContext(c)
			ctx := c.Context() // lease.Context(): pass it to Redis, nested Locks, ...
			return c.SendString(fmt.Sprintf("locked %s, same lease %v", lease.Key(), fiberlock.FromContext(ctx) == lease))
		})

	for _, q := range []string{"?user_id=42", ""} {
		resp, err := app.Test(httptest.NewRequest("POST", "/voucher-order/seckill/7"+q, nil), fiber.TestConfig{Timeout: 0})
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 locked order:42:7, same lease true
	// 400 {"error":"query.user_id: missing or empty value"}
}
