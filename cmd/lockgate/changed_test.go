package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
)

// TestForceReleaseChangedHands: when the lock changes hands between the
// inspection and the release, release --force removes nothing, says so and
// exits 1, and the new holder keeps the lock. A proxy holds the inspect's
// reply back (Redis has run it: it saw the old hold) while the old holder's
// hold ends and another owner takes the lock; then the release goes out
// with the old owner.
func TestForceReleaseChangedHands(t *testing.T) {
	for _, tc := range []struct {
		name string
		// end ends the old hold: l took it, other can see it
		end func(t *testing.T, l, other *core.Locker, old *core.Lease)
	}{
		{
			// The holder's process dies: its lock expires in Redis.
			name: "holder died and its lock expired",
			end: func(t *testing.T, l, other *core.Locker, old *core.Lease) {
				l.Close() // stops the renewals; releases nothing in Redis
				// A Lock of the key waits out the old hold's TTL (no release
				// tells it) and gets it only once it expired.
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				s, err := other.Lock(ctx, old.Key())
				if err != nil {
					t.Fatalf("the old hold did not expire within 3s: %v", err)
				}
				if err := s.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			// The holder finishes and unlocks.
			name: "holder unlocked",
			end: func(t *testing.T, _, _ *core.Locker, old *core.Lease) {
				if err := old.Unlock(context.Background()); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			proxy := redistest.StartProxy(t, srv.Addr)
			first := newLocker(t, srv.Client(t))
			second := newLocker(t, srv.Client(t))
			old := take(t, first, "order:5", core.WithTTL(300*time.Millisecond))
			inspectNow(t, first, "order:5") // the script is cached: the command's first EVALSHA runs it

			// The inspect script's call: two keys, the lock's waiter entries last.
			isInspect := func(cmd []string) bool {
				return len(cmd) > 4 && strings.HasPrefix(strings.ToUpper(cmd[0]), "EVAL") && cmd[2] == "2" && cmd[4] == "lockgate:{order:5}:qt"
			}
			hold := proxy.HoldReply(isInspect, 2*time.Second) // the old hold ends meanwhile (TTL 300ms)
			done := make(chan result, 1)
			go func() {
				var out, errOut strings.Builder
				code := run(context.Background(), []string{"-addr", proxy.Addr, "-timeout", "10s", "release", "order:5", "--force"}, &out, &errOut)
				done <- result{code: code, stdout: out.String(), stderr: errOut.String()}
			}()
			select {
			case <-hold.Matched():
			case <-time.After(5 * time.Second):
				t.Fatal("the command's inspect did not reach Redis within 5s")
			}
			tc.end(t, first, second, old)
			next := take(t, second, "order:5")
			r := <-done
			t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			select {
			case <-hold.Released():
			default:
				t.Fatal("the command ended before the held reply was delivered")
			}

			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			if !strings.Contains(r.stderr, "changed hands") || !strings.Contains(r.stderr, strconv.FormatInt(old.Fence(), 10)) {
				t.Errorf("stderr %q: want changed hands and the inspected fence %d", r.stderr, old.Fence())
			}
			if strings.Contains(r.stdout, "released") {
				t.Errorf("stdout %q claims a release", r.stdout)
			}
			if info := inspectNow(t, second, "order:5"); !info.Held || info.Fence != next.Fence() {
				t.Errorf("after the refused release: %+v, want held by the new holder (fence %d)", info, next.Fence())
			}
			select {
			case <-next.Done():
				t.Errorf("the new holder's lease ended: %v", context.Cause(next.Context()))
			default:
			}
		})
	}
}
