// Package rig is lockgate's fault-injection rig: worker processes compete
// for a few keys and write under their locks to a fenced resource, a chaos
// controller injects faults on a schedule drawn from a seed, and a checker
// reads what happened and counts violations. See cmd/torture.
package rig

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// now is the wall clock in nanoseconds: every process of a run is on one
// machine, so the kernel's clock orders their events (to a few µs).
func now() int64 { return time.Now().UnixNano() }

// Event is one line of a worker's log.
type Event struct {
	// Ev is what happened:
	//   begin:  a Lock or TryLock (Op) is about to be called
	//   queued: that call found the lock busy and waits in its queue
	//           (the Locker's EventWaiting), at Start
	//   call:   a Lock, TryLock, re-entry, Extend or Unlock (Op) and its result
	//   end:    the holder stopped believing it holds the lock (Why)
	//   write:  a write to the resource under a hold
	//   renewed: the watchdog renewed the hold of Key with Fence (the
	//           Locker's EventRenewed without an error), at Start: the
	//           lock lives in Redis until at most a TTL after it
	Ev string `json:"ev"`
	// Worker is the process ("w<i>.<generation>"), and for a crowd's
	// goroutines "/g<j>" after it: one call at a time each.
	Worker string `json:"w"`
	Key    string `json:"k,omitempty"`
	// Holder names the Lock or TryLock call (begin, queued, call) and the
	// hold it obtained.
	Holder string `json:"h,omitempty"`
	Op     string `json:"op,omitempty"`
	Start  int64  `json:"t0,omitempty"`
	End    int64  `json:"t1,omitempty"`
	// Budget is how long the call may take (ns): the wait budget, or the
	// context's deadline when earlier.
	Budget int64 `json:"b,omitempty"`
	// Ends is, for an acquiring call, when its request's context ends at
	// the latest (deadline or cancellation, on Start's clock): a lease
	// whose context ended without Unlock is no longer renewed and expires
	// within one TTL, so its Unlock after then may find it not held.
	Ends int64 `json:"ends,omitempty"`
	// TTL is the lease time the call asked for (ns).
	TTL   int64  `json:"ttl,omitempty"`
	Res   string `json:"r,omitempty"`
	Fence int64  `json:"f,omitempty"`
	// Live: the holder's lease context was live when it decided to write.
	Live bool   `json:"live,omitempty"`
	Why  string `json:"why,omitempty"`
	// N is a semaphore request's permits (OpSem); 1 for a read-write
	// request's (OpRW).
	N int `json:"n,omitempty"`
	// Read: a read-write request that takes the read lock (RLock).
	Read bool `json:"read,omitempty"`
}

// proc is the process of an event's worker.
func (e *Event) proc() string {
	p, _, _ := strings.Cut(e.Worker, "/")
	return p
}

// Results of a call.
const (
	ResAcquired    = "acquired"
	ResReentered   = "reentered"
	ResBusy        = "busy"
	ResUnavailable = "unavailable"
	ResCanceled    = "canceled"
	ResDeadline    = "deadline"
	ResClosed      = "closed"
	ResOK          = "ok"
	ResNotHeld     = "not_held"
	ResOther       = "other"
	ResGivenBack   = "given_back" // a key of a multi request that failed on another key (the checker's, never logged)
)

// Write is one write the resource received.
type Write struct {
	Seq      int64  `json:"seq"`
	At       int64  `json:"t"`
	Key      string `json:"k"`
	Holder   string `json:"h"`
	Fence    int64  `json:"f"`
	Live     bool   `json:"live"`
	Accepted bool   `json:"acc"`
}

// Fault is one injected fault.
type Fault struct {
	Kind string `json:"fault"`
	// Target is the worker process of a worker fault, the node (its
	// address) of a node's fault; empty for the whole deployment.
	Target string `json:"target,omitempty"`
	Start  int64  `json:"t0"`
	End    int64  `json:"t1"`
	// D is the latency a latency fault added to every reply (ns).
	D int64 `json:"d,omitempty"`
}

// Fault kinds.
const (
	FaultPause      = "pause_holder"     // a worker SIGSTOPped past the TTL
	FaultKill       = "kill_holder"      // a worker SIGKILLed (and started again)
	FaultRestart    = "redis_restart"    // Redis restarted empty
	FaultHangShort  = "redis_hang_short" // Redis SIGSTOPped for less than the read timeout
	FaultHangLong   = "redis_hang_long"  // ... for more
	FaultLateReply  = "late_reply"       // one reply held past the read timeout
	FaultCut        = "cut"              // every connection cut
	FaultLatency    = "latency"          // latency added to every reply
	FaultFailover   = "failover"         // Sentinel failover forced
	FaultMasterHang = "master_hang"      // the Sentinel master SIGSTOPped briefly

	// Every topology: the slow path of one worker.
	FaultWorkerLatency = "worker_latency" // latency on every reply to one worker (below the read timeout)
	FaultSlowReply     = "slow_reply"     // the next script's reply to one worker held below the read timeout (no re-send)
	FaultKillWaiters   = "kill_waiters"   // the crowd of waiters SIGKILLed while queued (and started again)
	// Only when named in RunConfig.Faults (not in a default run):
	FaultCommandLatency = "command_latency" // one in three of one process's command replies held 0.3–0.8 read timeouts, its Pub/Sub connection untouched

	// NoFaults, as RunConfig.Faults' only kind, runs the workload without
	// any fault.
	NoFaults = "none"

	// Cluster topology: faults of one master (no replicas: its slots wait
	// for it), and resharding.
	FaultMasterPause   = "master_pause"   // one master SIGSTOPped for 0.3–2 read timeouts
	FaultMasterRestart = "master_restart" // one master killed and restarted at once, empty
	FaultMigrate       = "migrate"        // a hot key's slot moved to another master, keys and all

	// Redlock topology: faults of one of the masters (a majority stays).
	// The checker excuses nothing for them: one node down, hung or emptied
	// must not break any promise.
	FaultNodeRestart = "node_restart"   // one master killed, and started empty a TTL later (redis.io's delayed restart)
	FaultNodeHang    = "node_hang"      // one master SIGSTOPped for 0.3–3 read timeouts
	FaultNodeNet     = "node_net_fault" // one master's proxy: a reply held, connections cut, or latency
)

// jsonLog appends JSON lines to a file, one per record, safe for
// concurrent use. Each line is written whole, so a process killed mid-run
// leaves at worst a torn last line.
type jsonLog struct {
	mu sync.Mutex
	w  *bufio.Writer
	f  *os.File
}

func createLog(path string) (*jsonLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &jsonLog{w: bufio.NewWriterSize(f, 64<<10), f: f}, nil
}

// add writes v; flush makes it durable against a SIGKILL.
func (l *jsonLog) add(v any, flush bool) {
	b, _ := json.Marshal(v)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n'))
	if flush {
		l.w.Flush()
	}
}

func (l *jsonLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Flush()
	return l.f.Close()
}

// readLines decodes every whole JSON line of path into a new T, skipping a
// torn last line.
func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	dec := json.NewDecoder(f)
	for {
		var v T
		if err := dec.Decode(&v); err == io.EOF {
			return out, nil
		} else if err != nil {
			return out, nil // a torn last line of a killed process
		}
		out = append(out, v)
	}
}
