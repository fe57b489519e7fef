package grpclock

// FailureStatus is failureStatus, for the tests of package grpclock_test.
var FailureStatus = failureStatus
