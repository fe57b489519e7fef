package seckill_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/lockgate/lockgate/example/seckill"
)

// A node of the flash sale on an embedded SQLite file. With LockRedis the
// order route is wrapped by one line of lockgate middleware (Config.Locker
// set); LockLocal, used here so the example needs no Redis, is the
// single-node mutex that fails across nodes.
func ExampleNewFiberApp() {
	dir, _ := os.MkdirTemp("", "seckill-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := seckill.Open(ctx, filepath.Join(dir, "seckill.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Seed(ctx, 1, 200); err != nil {
		log.Fatal(err)
	}
	app, err := seckill.NewFiberApp(seckill.Config{Service: &seckill.Service{Store: st}, Mode: seckill.LockLocal})
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		resp, err := app.Test(httptest.NewRequest("POST", "/voucher-order/seckill/1?user_id=7", nil))
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(body))
	}
	r, _ := st.Report(ctx, 1)
	fmt.Println(r)
	// Output:
	// 200 {"order_id":1}
	// 400 {"error":"User has already purchased"}
	// orders=1 duplicates=0 oversold=0
}
