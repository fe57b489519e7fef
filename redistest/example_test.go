package redistest_test

import (
	"context"
	"fmt"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// ExampleNewCluster starts a three-master cluster outside a test (in a test
// use StartCluster, which closes it at cleanup).
func ExampleNewCluster() {
	cl, err := redistest.NewCluster(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cl.Close()
	c := redis.NewClusterClient(cl.Options())
	defer c.Close()
	ctx := context.Background()
	c.Set(ctx, "{user:1}:cart", "3 items", 0)
	fmt.Println(c.Get(ctx, "{user:1}:cart").Val(), len(cl.Servers))
	// Output: 3 items 3
}

// ExampleNewSentinel starts a master, a replica and a sentinel, and talks
// to the master through the sentinel (in a test use StartSentinel).
func ExampleNewSentinel() {
	st, err := redistest.NewSentinel()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	c := redis.NewFailoverClient(st.Options())
	defer c.Close()
	ctx := context.Background()
	c.Set(ctx, "greeting", "hello", 0)
	fmt.Println(c.Get(ctx, "greeting").Val(), st.MasterName)
	// Output: hello lockgate-master
}
