package connectlock

// FailureError is failureError, for the tests of package connectlock_test.
var FailureError = failureError
