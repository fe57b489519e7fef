package fence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/fence"
)

// The Guard's statements run on the real databases in the fence/drivertest
// module (it has the drivers); here, what needs none.

// TestNew: the three dialects, table names (the only text a Guard puts in
// its SQL besides its own) and an unknown dialect.
func TestNew(t *testing.T) {
	for _, d := range []fence.Dialect{fence.Postgres, fence.SQLite, fence.MySQL} {
		g, err := fence.New(d)
		if err != nil {
			t.Fatal(err)
		}
		if g.Dialect() != d || g.Table() != fence.DefaultTable || !strings.Contains(g.DDL(), "CREATE TABLE IF NOT EXISTS lockgate_fences (resource ") {
			t.Fatalf("%v: dialect %v table %q DDL %q", d, g.Dialect(), g.Table(), g.DDL())
		}
	}
	if fence.MariaDB != fence.MySQL || fence.MySQL.String() != "mysql" {
		t.Fatal("MariaDB is MySQL")
	}
	if _, err := fence.New(fence.Dialect(9)); err == nil {
		t.Fatal("unknown dialect accepted")
	}
	for _, name := range []string{"fences", "app.fences", "_f1"} {
		if g, err := fence.New(fence.Postgres, fence.WithTable(name)); err != nil || !strings.Contains(g.DDL(), " "+name+" ") {
			t.Errorf("WithTable(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "1f", "f; DROP TABLE x", "a.b.c", "f-s", `"f"`, strings.Repeat("f", 64)} {
		if _, err := fence.New(fence.Postgres, fence.WithTable(name)); err == nil {
			t.Errorf("WithTable(%q) accepted", name)
		}
	}
}

// TestCheckInvalid: a fence <= 0 or a bad resource is ErrInvalid before
// any statement (the nil transaction is never used); a nil transaction is
// an error, not a panic.
func TestCheckInvalid(t *testing.T) {
	g, err := fence.New(fence.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		resource string
		fence    int64
	}{{"r", 0}, {"r", -5}, {"", 1}, {strings.Repeat("r", fence.MaxResourceLen+1), 1}} {
		if err := g.Check(ctx, nil, c.resource, c.fence); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Check(%d bytes, %d): %v, want ErrInvalid", len(c.resource), c.fence, err)
		}
	}
	if err := g.Check(ctx, nil, "r", 1); err == nil || errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("nil tx: %v", err)
	}
}

// TestStaleError: its text, and errors.Is/As through wrapping.
func TestStaleError(t *testing.T) {
	var err error = &fence.StaleError{Resource: "order:1:1", Fence: 12, Highest: 15}
	if got, want := err.Error(), `fence: stale fence 12 for "order:1:1": 15 already seen`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	wrapped := errors.Join(errors.New("place order"), err)
	var e *fence.StaleError
	if !errors.Is(wrapped, fence.ErrStale) || !errors.As(wrapped, &e) || e.Highest != 15 {
		t.Fatalf("errors.Is/As through wrapping: %v", wrapped)
	}
	if errors.Is(errors.New("other"), fence.ErrStale) || errors.Is(err, fence.ErrInvalid) {
		t.Fatal("Is matches only ErrStale")
	}
}
