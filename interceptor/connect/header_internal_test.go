package connectlock

import (
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	"github.com/lockgate/lockgate/keyfunc"
)

// TestHeaderMD: {md.name} reads the first value of the request header;
// a binary header ("-bin") is decoded from base64 as gRPC metadata is,
// and one that does not decode is an invalid value; an absent header is
// missing.
func TestHeaderMD(t *testing.T) {
	h := http.Header{}
	h.Add("X-User-Id", "u1")
	h.Add("X-User-Id", "u2")
	h.Set("X-Tenant-Bin", connect.EncodeBinaryHeader([]byte("t:1")))
	h.Set("X-Bad-Bin", "%%%")
	md := headerMD(h)
	for _, tc := range []struct {
		name, value string
		ok          bool
		err         error
	}{
		{"x-user-id", "u1", true, nil},
		{"X-USER-ID", "u1", true, nil},
		{"x-tenant-bin", "t:1", true, nil},
		{"x-bad-bin", "", false, keyfunc.ErrInvalidValue},
		{"x-none", "", false, nil},
	} {
		v, ok, err := md(tc.name)
		if v != tc.value || ok != tc.ok || !errors.Is(err, tc.err) {
			t.Errorf("md(%q) = %q, %v, %v; want %q, %v, %v", tc.name, v, ok, err, tc.value, tc.ok, tc.err)
		}
	}
}
