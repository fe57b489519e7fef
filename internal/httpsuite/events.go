package httpsuite

import (
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
)

// eventsNameTheTemplate: every lock event of a route — acquired, renewed,
// waiting, not obtained, released — names the route's key template as its
// Pattern, never the key (request data), whatever the request's values.
func eventsNameTheTemplate(t *testing.T, s Stack) {
	e := newEnv(t, s)
	pats := &locktest.Patterns{}
	var ev locktest.Events
	l := e.locker(core.WithObserver(locktest.Observers(pats, &ev)))
	const key = "order:{query.user:int}"
	inside := make(chan string, 1)
	g := e.gate()
	hold := holdRoute("/hold", l, key, inside, g)
	hold.Options.TTL = time.Second // renewed while it holds
	wait := keyRoute("/wait", l, key)
	wait.Options.Wait = 300 * time.Millisecond
	base := e.serve(hold, wait, keyRoute("/ok", l, key))

	k, first := e.hold(base+"/hold?user=42", inside)
	if _, ok := ev.Wait(e.waitCtx(), locktest.Is(core.EventRenewed, k)); !ok {
		t.Fatal("the held lock was never renewed")
	}
	if r := e.post(base + "/wait?user=042"); r.Err != nil || r.Status != 429 {
		t.Fatalf("/wait while held: %d %v %s, want 429", r.Status, r.Err, r.Body)
	}
	g.open()
	if r := recv(t, first, "the holding request"); r.Err != nil || r.Status != 200 {
		t.Fatalf("holding request: %d %v %s", r.Status, r.Err, r.Body)
	}
	if r := e.post(base + "/ok?user=7"); r.Err != nil || r.Status != 200 || r.Body != "order:7" {
		t.Fatalf("/ok: %d %v %q", r.Status, r.Err, r.Body)
	}
	// The release of /ok's lock comes before its answer.
	if _, ok := ev.Wait(e.waitCtx(), locktest.Is(core.EventReleased, "order:7")); !ok {
		t.Fatal("no release of order:7")
	}
	if msg := pats.Check("order:", key); msg != "" {
		t.Fatal(msg)
	}
	kinds := map[core.EventKind]bool{}
	for _, x := range ev.All() {
		kinds[x.Kind] = true
	}
	for _, want := range []core.EventKind{core.EventAcquired, core.EventRenewed, core.EventWaiting, core.EventNotObtained, core.EventReleased} {
		if !kinds[want] {
			t.Errorf("no %s event observed", want)
		}
	}
}
