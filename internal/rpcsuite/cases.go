package rpcsuite

// cases are the suite's behaviours, in the order Run runs them.
var cases = []suiteCase{
	// Locking (calls.go).
	{"one call at a time", testOneAtATime},
	{"lease in the handler", testLeaseInHandler},
	{"nested lock re-enters", testNestedReenters},
	{"busy is ResourceExhausted with RetryInfo", testBusy},
	{"different keys in parallel", testDifferentKeys},
	{"unannotated untouched", testUnannotated},
	// Limits (limit.go).
	{"a limit of 2 holds two calls of a key, the third busy", testLimit},
	{"a limit of 2 over two servers, never 3 inside", testLimitAcrossServers},
	// Shared locks (shared.go).
	{"shared calls of a key together, the writer excluded and not starved", testShared},
	{"a shared method on a Redlock Locker is Unavailable, logged", testSharedOnRedlock},
	// Keys and rules (keys.go).
	{"bad input names the field and locks nothing", testInvalidKey},
	{"typed placeholders canonical", testTypedCanonical},
	{"Go rule over the annotation", testGoRuleOverAnnotation},
	{"Go rule settings apply", testGoRuleSettings},
	{"events named by the key pattern", testEventsPattern},
	{"no owner from the request", testNoOwnerFromRequest},
	// Faults (faults.go).
	{"Redis down fail-closed and fail-open", testRedisDown},
	{"closed Locker never fails open", testClosedLocker},
	{"Redis hung is Unavailable within the bound", testRedisHung},
	{"deadline while busy is DeadlineExceeded", testDeadlineWhileBusy},
	{"lock lost cancels the handler", testLockLost},
	{"release after the client cancels", testReleaseAfterCancel},
	{"panic releases", testPanicReleases},
	// The answers to a failing Redis (answers.go).
	{"Redis refusing is Unavailable at once, its cause logged", testRefusedAtOnce},
	{"Redis hung, a single attempt within its budget", testHungSingleAttempt},
	{"a field typo in a key is a setup error", testFieldTypoIsSetupError},
	{"a body that does not decode names no Go type", testBadBody},
}
