package core

import (
	"strconv"
	"testing"

	"github.com/lockgate/lockgate/redistest"
)

// slotOf agrees with the server's CLUSTER KEYSLOT, and every slot has a tag
// that hashes to it.
func TestSlotOfMatchesRedis(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3).Client(t)
	ctx := t.Context()
	for _, k := range []string{"a", "foo", "order:42:7", "user1000.following", "123456789", "é%7D"} {
		want, err := c.ClusterKeySlot(ctx, "x{"+k+"}y").Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slotOf(k); int64(got) != want {
			t.Errorf("slotOf(%q) = %d, Redis says %d", k, got, want)
		}
	}
	tags := slotTags()
	for s, tag := range tags {
		if tag == "" || slotOf(tag) != s {
			t.Fatalf("slot %d: tag %q hashes to %d", s, tag, slotOf(tag))
		}
	}
	if _, err := strconv.Atoi(tags[0]); err != nil {
		t.Errorf("tag %q is not a number", tags[0])
	}
}
