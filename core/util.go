package core

import (
	"reflect"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ms renders d in whole milliseconds, as the scripts take TTLs and timeouts.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// signal wakes c's reader without blocking; a pending signal is enough.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// isNil reports whether c is nil or a typed nil pointer.
func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
