package connectlock

// FailureError is failureError, for the tests of package connectlock_test.
var FailureError = failureError

// PlainCodecsForTest are PlainCodecs' codecs.
func PlainCodecsForTest() []interface {
	Name() string
	Marshal(any) ([]byte, error)
	Unmarshal([]byte, any) error
} {
	return []interface {
		Name() string
		Marshal(any) ([]byte, error)
		Unmarshal([]byte, any) error
	}{plainCodec{name: "proto", binary: true}, plainCodec{name: "json"}}
}
