package httpsuite

import "testing"

func TestColonPath(t *testing.T) {
	for in, want := range map[string]string{
		"/x":                 "/x",
		"/seckill/{voucher}": "/seckill/:voucher",
		"/a/{b}/c/{d}":       "/a/:b/c/:d",
		"/v/{voucher}/items": "/v/:voucher/items",
	} {
		if got := ColonPath(in); got != want {
			t.Errorf("ColonPath(%q) = %q, want %q", in, got, want)
		}
	}
}
