package core_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/locktest"
	"github.com/lockgate/lockgate/redistest"
)

// failoverRounds is how many rounds TestFailoverKeepsAcknowledgedLocks
// runs: 1 in make test, more to measure (LOCKGATE_FAILOVER_ROUNDS, as
// make failover does).
func failoverRounds(t *testing.T) int {
	if v := os.Getenv("LOCKGATE_FAILOVER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LOCKGATE_FAILOVER_ROUNDS=%q", v)
		}
		return n
	}
	return 1
}

// A failover loses the writes the replica had not received; a lock granted
// with WithReplicaAck was received. Each round, on a master with one replica
// and three sentinels (quorum 2), through failover clients:
//
//  1. an acknowledged lock is taken (WithReplicaAck(1, 300ms));
//  2. the replica is stopped (SIGSTOP) and a 32 MiB write fills the
//     replication link, so what follows stays in the master's buffer: the
//     asynchronous window, made as wide as a slow or partitioned replica's;
//  3. a lock without acknowledgement is taken (the master grants it), and a
//     Lock with acknowledgement fails with ErrNotReplicated (it cannot be
//     granted unreplicated);
//  4. the master is killed, the replica resumed, and the sentinels promote it;
//  5. a second owner tries both locks on the new master.
//
// The acknowledged lock must be busy for the second owner in every round.
// The unacknowledged one is the probe that the window was real: its second
// owner gets it (the round's lost lock). The figures go to the log.
//
// Two ways to fail over: the master killed (the sentinels agree it is down
// and promote the replica), and SENTINEL FAILOVER forced right after the
// replica resumes, without letting it catch up. The probe is asserted for
// the kill (the window is certain); for the forced failover how often the
// unacknowledged lock is lost is measured (the replica races the promotion).
func TestFailoverKeepsAcknowledgedLocks(t *testing.T) {
	t.Parallel()
	for _, trigger := range []string{"kill", "forced"} {
		t.Run(trigger, func(t *testing.T) {
			rounds := failoverRounds(t)
			var lostPlain, keptAcked int
			for r := 0; r < rounds; r++ {
				plainLost, ackedKept := failoverRound(t, trigger, r)
				if plainLost {
					lostPlain++
				}
				if ackedKept {
					keptAcked++
				}
			}
			t.Logf("%s, %d rounds: lock without acknowledgement lost to a second owner in %d; acknowledged lock kept in %d", trigger, rounds, lostPlain, keptAcked)
			if keptAcked != rounds {
				t.Fatalf("an acknowledged lock was lost in %d of %d failovers", rounds-keptAcked, rounds)
			}
			if trigger == "kill" && lostPlain == 0 {
				t.Fatalf("probe: no unacknowledged lock was lost in %d rounds: the asynchronous window was not opened", rounds)
			}
		})
	}
}

func failoverRound(t *testing.T, trigger string, r int) (plainLost, ackedKept bool) {
	sen := redistest.StartSentinels(t, 3)
	master := sen.Master.Client(t)
	waitReplicaAcks(t, master)
	acked := locktest.Locker(t, sen.Client(t), core.WithReplicaAck(1, 300*time.Millisecond))
	plain := locktest.Locker(t, sen.Client(t))
	ctx := locktest.Context(t)
	locktest.Warm(t, acked)
	locktest.Warm(t, plain)
	if _, err := acked.Lock(ctx, "fo:acked"); err != nil {
		t.Fatalf("round %d: acknowledged lock: %v", r, err)
	}
	if err := sen.Replica.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			sen.Replica.Resume()
		}
	}()
	if err := master.Set(ctx, "fo:filler", strings.Repeat("x", 32<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Lock(ctx, "fo:plain"); err != nil {
		t.Fatalf("round %d: lock without acknowledgement: %v", r, err)
	}
	if _, err := acked.Lock(ctx, "fo:late", core.WithWait(time.Second)); !errors.Is(err, core.ErrNotReplicated) {
		t.Fatalf("round %d: acknowledged Lock with the replica stopped = %v, want ErrNotReplicated", r, err)
	}
	if trigger == "kill" {
		// The master dies with the tail of the stream in its buffer; then
		// the replica answers again (the sentinels need it to promote it).
		sen.Master.Stop()
		sen.Replica.Resume()
		resumed = true
		if err := sen.KillMaster(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	} else {
		sen.Replica.Resume()
		resumed = true
		if err := sen.FailoverNow(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	second := locktest.Locker(t, sen.Client(t))
	warmCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The failover client may still point at the old master for a moment.
	var s *core.Lease
	var err error
	for {
		s, err = second.TryLock(warmCtx, "fo:plain")
		if err == nil || errors.Is(err, core.ErrNotObtained) || warmCtx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err == nil {
		plainLost = true
		s.Unlock(ctx)
	} else if !errors.Is(err, core.ErrNotObtained) {
		t.Fatalf("round %d: second owner on the new master: %v", r, err)
	}
	_, err = second.TryLock(ctx, "fo:acked")
	ackedKept = errors.Is(err, core.ErrNotObtained)
	if !ackedKept && err != nil {
		t.Fatalf("round %d: second owner of the acknowledged lock: %v", r, err)
	}
	t.Logf("%s round %d: unacknowledged lock lost %v, acknowledged lock kept %v", trigger, r, plainLost, ackedKept)
	return plainLost, ackedKept
}
