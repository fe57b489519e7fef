module github.com/lockgate/lockgate/middleware/echov5

go 1.26.0

require (
	github.com/labstack/echo/v5 v5.4.6
	github.com/lockgate/lockgate v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

replace github.com/lockgate/lockgate => ../..
