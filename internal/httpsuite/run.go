package httpsuite

import "testing"

// cases are the suite's subtests, in the order they run. Each starts its
// own redis-server.
var cases = []struct {
	name string
	run  func(t *testing.T, s Stack)
}{
	{"GoodSettings", goodSettings},
	{"BadInput", badInput},
	{"LeaseInHandler", leaseInHandler},
	{"CtxPlaceholder", ctxPlaceholder},
	{"Busy", busy},
	{"RedisDown", redisDown},
	{"RedisHung", redisHung},
	{"ClosedLocker", closedLocker},
	{"ContextOutcomes", contextOutcomes},
	{"ClientGoneWhileWaiting", clientGoneWhileWaiting},
	{"LockLost", lockLost},
	{"PanicReleases", panicReleases},
	{"ReleaseAfterCancel", releaseAfterCancel},
	{"OneAtATime", oneAtATime},
	{"DifferentKeysOverlap", differentKeysOverlap},
	{"Limit", limit},
	{"LimitAcrossInstances", limitAcrossInstances},
	{"Shared", shared},
	{"SharedOnRedlock", sharedOnRedlock},
	{"TypedPlaceholders", typedPlaceholders},
	{"PathUnescaped", pathUnescaped},
	{"UnfillablePlaceholder", unfillablePlaceholder},
	{"NoOwnerFromRequest", noOwnerFromRequest},
	{"EventsNameTheTemplate", eventsNameTheTemplate},
}

func run(t *testing.T, s Stack) {
	if s.Name == "" || s.Serve == nil {
		t.Fatal("httpsuite: a Stack needs a Name and a Serve")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case on redis-servers of its own
			c.run(t, s)
		})
	}
}
