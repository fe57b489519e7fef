package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/redistest"
)

// rwScripts runs the lock's four scripts directly, on raw keys, so that a
// test can drive any interleaving of callers (and re-sends) and look at
// Redis after each call.
type rwScripts struct {
	c                    *redis.Client
	acq, rel, racq, rrel *redis.Script
	hash, floor, q, qt   string
}

func newRWScripts(t *testing.T, c *redis.Client, name, racq string) *rwScripts {
	t.Helper()
	a, err := core.ScriptSource("acquire")
	if err != nil {
		t.Fatal(err)
	}
	r, err := core.ScriptSource("release")
	if err != nil {
		t.Fatal(err)
	}
	h := "lockgate:{" + name + "}"
	return &rwScripts{c: c, acq: redis.NewScript(a), rel: redis.NewScript(r),
		racq: redis.NewScript(racq), rrel: redis.NewScript(core.RLockScriptSource("release")),
		hash: h, floor: h + ":f", q: h + ":q", qt: h + ":qt"}
}

func (s *rwScripts) keys(owner string) []string {
	return []string{s.hash, s.floor, s.hash + ":done:" + owner, s.q, s.qt}
}

// acquire runs the writer's (read false) or a reader's acquire: entry ""
// for a single attempt. It returns the raw answer.
func (s *rwScripts) acquire(t *testing.T, read bool, owner string, ttl int, entry string, seq int) any {
	t.Helper()
	sc := s.acq
	if read {
		sc = s.racq
	}
	v, err := sc.Run(context.Background(), s.c, s.keys(owner), owner, ttl, 600000, entry, seq).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatalf("acquire(%v, %s): %v", read, owner, err)
	}
	return v
}

func (s *rwScripts) release(t *testing.T, read bool, owner string, marker string) int64 {
	t.Helper()
	sc := s.rel
	if read {
		sc = s.rrel
	}
	v, err := sc.Run(context.Background(), s.c, s.keys(owner), owner, 600000, marker).Int64()
	if err != nil {
		t.Fatalf("release(%v, %s): %v", read, owner, err)
	}
	return v
}

// state reads the lock: the writer ("" none), the live readers, the 'w'
// flag, and the queue in order with each entry's reader flag.
type rwState struct {
	writer  string
	readers map[string]bool
	w       bool
	queue   []string
	qread   map[string]bool
}

func (s *rwScripts) state(t *testing.T) rwState {
	t.Helper()
	ctx := context.Background()
	now := s.c.Time(ctx).Val().UnixMilli()
	st := rwState{readers: map[string]bool{}, qread: map[string]bool{}}
	for k, v := range s.c.HGetAll(ctx, s.hash).Val() {
		switch {
		case k == "owner":
			st.writer = v
		case k == "w":
			st.w = true
		case len(k) > 1 && k != "fence" && !strings.Contains(v, "|"):
			st.writer = k // a lean hold: its one field, named by the owner
		case len(k) > 1 && k != "fence":
			exp, _, _ := strings.Cut(v, "|")
			if ms, _ := strconv.ParseInt(exp, 10, 64); ms > now {
				st.readers[k] = true
			}
		}
	}
	ents := s.c.HGetAll(ctx, s.qt).Val()
	for _, o := range s.c.ZRange(ctx, s.q, 0, -1).Val() {
		e := ents[o]
		exp, rest, _ := strings.Cut(e, "|")
		if ms, _ := strconv.ParseInt(exp, 10, 64); ms <= now {
			continue // expired: not a live waiter
		}
		st.queue = append(st.queue, o)
		seq, _, _ := strings.Cut(rest, "|")
		st.qread[o] = strings.HasSuffix(seq, "r")
	}
	return st
}

// check is the invariants of a lock whose holders and waiters all live
// (long TTLs): never a writer beside a live reader; a lock that no one
// holds has no one waiting (a live waiter would have been handed it); a
// lock that readers hold has a writer at the head of its queue (a reader
// there would have gone in with them); a writer's hold with waiters has
// w set (else its release hands nothing on).
func (st rwState) check() string {
	switch {
	case st.writer != "" && len(st.readers) > 0:
		return fmt.Sprintf("writer %s beside %d live readers", st.writer, len(st.readers))
	case st.writer == "" && len(st.readers) == 0 && len(st.queue) > 0:
		return fmt.Sprintf("free lock with %d live waiters (head %s, reader %v)", len(st.queue), st.queue[0], st.qread[st.queue[0]])
	case st.writer == "" && len(st.readers) > 0 && len(st.queue) > 0 && st.qread[st.queue[0]]:
		return fmt.Sprintf("readers hold, and reader %s waits at the head", st.queue[0])
	case st.writer != "" && len(st.queue) > 0 && !st.w:
		return fmt.Sprintf("writer holds with %d waiters and no w flag", len(st.queue))
	}
	return ""
}

type simClient struct {
	id     string
	read   bool
	state  int // 0 idle, 1 waiting, 2 holding
	seq    int
	n      int
	single bool
}

// TestRWModel drives random callers (readers and writers, waiting and
// single attempts, leaving the queue, re-sent scripts) through the scripts
// and checks the invariants after every call. Control: a reader's acquire
// that does not wait behind a queued writer is caught overtaking it.
func TestRWModel(t *testing.T) {
	t.Parallel()
	src := core.RLockScriptSource("acquire")
	if msg := testRWModel(t, false, src); msg != "" {
		t.Fatal(msg)
	}
	naive := strings.Replace(src, "    elseif live > 0 then", "    elseif true then\n      break\n    elseif live > 0 then", 1)
	if naive == src {
		t.Fatal("control: the edit did not apply")
	}
	msg := testRWModel(t, false, naive)
	t.Logf("control, readers that overtake a queued writer: %s", strings.SplitN(msg, "\n", 2)[0])
	if !strings.Contains(msg, "went in ahead") {
		t.Fatalf("control: the model did not catch readers overtaking a writer (%q)", msg)
	}
}

// TestRWModelExpiries is TestRWModel with holders and waiters that die:
// a writer's hash expires, a reader's field expires (left in the hash), a
// waiter's entry expires. The strong invariants are checked once every
// live waiter has refreshed (its timer).
func TestRWModelExpiries(t *testing.T) {
	t.Parallel()
	if msg := testRWModel(t, true, core.RLockScriptSource("acquire")); msg != "" {
		t.Fatal(msg)
	}
}

// modelFailure ends a seed of testRWModel: its message and steps.
type modelFailure string

// testRWModel runs 100 seeds of the model with racq as the reader's
// acquire script, and returns the first failure ("" for none).
func testRWModel(t *testing.T, expiries bool, racq string) (failure string) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(modelFailure)
			if !ok {
				panic(r)
			}
			failure = string(f)
		}
	}()
	seeds := 100
	for seed := 0; seed < seeds; seed++ {
		name := fmt.Sprintf("m%d", seed)
		s := newRWScripts(t, c, name, racq)
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		var cs []*simClient
		for i := 0; i < 8; i++ {
			cs = append(cs, &simClient{id: fmt.Sprintf("%s-c%d-0", name, i), read: rng.IntN(2) == 0})
		}
		var log []string
		fail := func(msg string) {
			panic(modelFailure(fmt.Sprintf("seed %d: %s\nsteps:\n%s", seed, msg, strings.Join(log, "\n"))))
		}
		dirty := false
		for step := 0; step < 120; step++ {
			cl := cs[rng.IntN(len(cs))]
			st := s.state(t)
			if expiries && rng.IntN(8) == 0 && cl.state != 0 {
				// cl's process dies: its hold or its queue entry expires
				ctx := context.Background()
				switch {
				case cl.state == 2 && !cl.read:
					c.Del(ctx, s.hash)
				case cl.state == 2:
					v := c.HGet(ctx, s.hash, cl.id).Val()
					_, rest, _ := strings.Cut(v, "|")
					c.HSet(ctx, s.hash, cl.id, "1|"+rest) // a leftover field
				default:
					v := c.HGet(ctx, s.qt, cl.id).Val()
					_, rest, _ := strings.Cut(v, "|")
					c.HSet(ctx, s.qt, cl.id, "1|"+rest)
				}
				log = append(log, fmt.Sprintf("%s expires (state %d read=%v)", cl.id, cl.state, cl.read))
				cl.state = 0
				dirty = true
				continue
			}
			if dirty && rng.IntN(4) == 0 {
				// every waiter refreshes (its timer): the lock goes on
				for _, o := range cs {
					if o.state != 1 {
						continue
					}
					o.seq++
					v := s.acquire(t, o.read, o.id, 600000, "600000", o.seq)
					log = append(log, fmt.Sprintf("%s timer refresh read=%v -> %v", o.id, o.read, v))
					if f, ok := v.(int64); ok && f > 0 {
						o.state = 2
					}
				}
				for _, o := range cs {
					if o.state == 1 {
						// a second round: grants from the first are seen
						o.seq++
						v := s.acquire(t, o.read, o.id, 600000, "600000", o.seq)
						log = append(log, fmt.Sprintf("%s timer refresh 2 read=%v -> %v", o.id, o.read, v))
						if f, ok := v.(int64); ok && f > 0 {
							o.state = 2
						}
					}
				}
				dirty = false
				st = s.state(t)
				log = append(log, fmt.Sprintf("  state: writer=%q readers=%d w=%v queue=%v", st.writer, len(st.readers), st.w, st.queue))
				if msg := st.check(); msg != "" {
					fail("after every waiter refreshed: " + msg)
				}
				continue
			}
			// learn grants from Redis
			for _, o := range cs {
				if o.state == 1 && (st.writer == o.id || st.readers[o.id]) {
					o.state = 2
				}
			}
			resend := rng.IntN(4) == 0
			switch cl.state {
			case 0:
				cl.n++
				cl.id = fmt.Sprintf("%s-c%s-%d", name, strings.Split(cl.id, "-c")[1][:1], cl.n)
				cl.read = rng.IntN(2) == 0
				cl.single = rng.IntN(5) == 0
				cl.seq = 1
				entry := "600000"
				if cl.single {
					entry = ""
				}
				var v any
				for k := 0; k < 1+btoi(resend); k++ {
					v = s.acquire(t, cl.read, cl.id, 600000, entry, cl.seq)
				}
				log = append(log, fmt.Sprintf("%s acquire read=%v single=%v resend=%v -> %v", cl.id, cl.read, cl.single, resend, v))
				if f, ok := v.(int64); ok && f > 0 {
					if msg := overtook(st, cl.id, cl.read); msg != "" {
						fail("FIFO: " + msg)
					}
					cl.state = 2
				} else if !cl.single {
					cl.state = 1
				}
			case 1:
				if rng.IntN(2) == 0 {
					cl.seq++
					var v any
					for k := 0; k < 1+btoi(resend); k++ {
						v = s.acquire(t, cl.read, cl.id, 600000, "600000", cl.seq)
					}
					log = append(log, fmt.Sprintf("%s refresh read=%v resend=%v -> %v", cl.id, cl.read, resend, v))
					if f, ok := v.(int64); ok && f > 0 {
						if msg := overtook(st, cl.id, cl.read); msg != "" {
							fail("FIFO: " + msg)
						}
						cl.state = 2
					}
				} else {
					var v int64
					for k := 0; k < 1+btoi(resend); k++ {
						v = s.release(t, cl.read, cl.id, "60000")
					}
					log = append(log, fmt.Sprintf("%s leave read=%v resend=%v -> %v", cl.id, cl.read, resend, v))
					cl.state = 0
					if v == 0 {
						log = append(log, "  (it was holding)")
					}
				}
			case 2:
				marker := "60000"
				if !resend && rng.IntN(2) == 0 {
					marker = "0"
				}
				var v int64
				for k := 0; k < 1+btoi(resend); k++ {
					v = s.release(t, cl.read, cl.id, marker)
				}
				log = append(log, fmt.Sprintf("%s release read=%v resend=%v -> %v", cl.id, cl.read, resend, v))
				if v != 0 {
					fail(cl.id + ": release of a hold answered not held")
				}
				cl.state = 0
				if resend {
					// a late copy of its acquire does nothing
					v := s.acquire(t, cl.read, cl.id, 600000, "600000", cl.seq)
					log = append(log, fmt.Sprintf("%s late acquire copy -> %v", cl.id, v))
					if v != nil {
						fail(cl.id + ": late acquire copy after release answered " + fmt.Sprint(v))
					}
				}
			}
			st = s.state(t)
			log = append(log, fmt.Sprintf("  state: writer=%q readers=%d w=%v queue=%v", st.writer, len(st.readers), st.w, st.queue))
			if st.writer != "" && len(st.readers) > 0 {
				fail("mutual exclusion: " + st.check())
			}
			if msg := st.check(); msg != "" && !dirty {
				fail(msg)
			}
			if st.writer != "" && len(st.queue) > 0 && !st.w {
				fail("writer holds with live waiters and no w (its release hands nothing on)")
			}
			// holders in the model agree with Redis
			for _, o := range cs {
				if o.state == 2 && st.writer != o.id && !st.readers[o.id] {
					fail(o.id + " holds in the model, not in Redis")
				}
			}
		}
	}
	return ""
}

// overtook reports whether owner, answered a hold by its acquire when
// pre was the lock's state before it, went ahead of a live waiter it must
// not overtake: a writer ahead of anyone, a reader ahead of a writer.
func overtook(pre rwState, owner string, read bool) string {
	for _, o := range pre.queue {
		if o == owner {
			return ""
		}
		if !read || !pre.qread[o] {
			return fmt.Sprintf("%s (read=%v) went in ahead of waiter %s (read=%v)", owner, read, o, pre.qread[o])
		}
	}
	return ""
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
