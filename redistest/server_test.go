package redistest_test

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// pingOnce sends one PING with a short deadline and no retries.
func pingOnce(c *redis.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	return c.Ping(ctx).Err()
}

// pingWithin sends up to 5 PINGs (each as pingOnce) until one is answered,
// for a server that has just been resumed or restarted on a busy machine.
func pingWithin(c *redis.Client) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = pingOnce(c); err == nil {
			return nil
		}
	}
	return err
}

func shortClient(t *testing.T, s *redistest.Server) *redis.Client {
	o := s.Options()
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestServerPauseResume: a paused server answers nothing, a resumed one
// answers again on the same address.
func TestServerPauseResume(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := shortClient(t, s)
	if err := pingOnce(c); err != nil { // control: it answers before the pause
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := pingOnce(c); err == nil {
		t.Fatal("PING answered while paused")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := pingWithin(c); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

// TestServerStopRestart: a stopped server refuses connections; Restart
// brings it back on the same address, empty.
func TestServerStopRestart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := shortClient(t, s)
	addr := s.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if err := pingOnce(c); err == nil {
		t.Fatal("PING answered after Stop")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr != addr {
		t.Fatalf("restarted on %s, was %s", s.Addr, addr)
	}
	if err := pingWithin(c); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET after Restart: %v, want redis.Nil (no persistence)", err)
	}
	// Restart of a running server works too.
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := pingWithin(c); err != nil {
		t.Fatalf("PING after second Restart: %v", err)
	}
}

// TestPauseStoppedServerFails: signals need a running process.
func TestPauseStoppedServerFails(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Stop()
	if err := s.Pause(); err == nil {
		t.Fatal("Pause of a stopped server succeeded")
	}
}

// TestRestartOnTakenPortFails: a server that cannot bind its port (another
// redis-server took it while it was stopped, as a test running in parallel
// may) fails to start, rather than pass the other server off as itself.
// Control: the same Restart with the port free succeeds.
func TestRestartOnTakenPortFails(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	s.Stop()
	other := exec.Command(redistest.Binary, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	c := shortClient(t, s)
	if err := pingWithin(c); err != nil {
		other.Process.Kill()
		other.Wait()
		t.Fatalf("the other redis-server does not answer on %s: %v", s.Addr, err)
	}
	err := s.Restart()
	other.Process.Kill()
	other.Wait()
	// Refused either way: the other server answered first ("another
	// redis-server's"), or this one's process exited unable to bind.
	if err == nil || !strings.Contains(err.Error(), "another redis-server") && !strings.Contains(err.Error(), "exited") {
		t.Fatalf("Restart on a port another redis-server holds = %v, want it refused", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("control: Restart once the port is free = %v", err)
	}
}
