package lockhttp

import (
	"errors"
	"slices"
	"testing"

	"github.com/lockgate/lockgate/keyfunc"
)

func TestRouteParams(t *testing.T) {
	for _, c := range []struct {
		route string
		want  []string
	}{
		{"/v/:voucher", []string{"voucher"}},
		{"POST /v/{voucher}/{rest...}", []string{"voucher", "rest"}},
		{"/v/{id:[0-9]+}/x", []string{"id"}},
		{"/v/:a?/*path", []string{"a", "path"}},
		{"/v/a:b/{$}", nil},
	} {
		if got := RouteParams(c.route); !slices.Equal(got, c.want) {
			t.Errorf("RouteParams(%q) = %q, want %q", c.route, got, c.want)
		}
	}
}

// TestCheckRoute: a {path.name} the route does not have is a setup error
// naming the template and the route; the control, the right name, passes.
func TestCheckRoute(t *testing.T) {
	typo := keyfunc.MustCompile("order:{path.vouchr:int}", keyfunc.HTTP())
	err := CheckRoute(typo, "/v/:voucher")
	var ke *keyfunc.Error
	if !errors.Is(err, keyfunc.ErrBadTemplate) || !errors.As(err, &ke) || ke.Part != "path.vouchr" {
		t.Fatalf("CheckRoute: %v, want ErrBadTemplate naming path.vouchr", err)
	}
	good := keyfunc.MustCompile("order:{path.voucher:int}", keyfunc.HTTP())
	if err := CheckRoute(good, "/v/:voucher"); err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := CheckRoute(typo, ""); err != nil {
		t.Fatalf("no route: %v, want nothing checked", err)
	}
}
