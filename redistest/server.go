package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Binary is the redis-server executable looked up on PATH.
var Binary = "redis-server"

// ErrNoRedis reports that redis-server is not installed.
var ErrNoRedis = errors.New("redistest: redis-server not found on PATH; install it (Debian/Ubuntu: apt-get install redis-server, or run `make test`, which does it as root)")

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// clientTimeout is the dial, read and write timeout of every client option
// set this package hands out, so that fault tests fail fast.
const clientTimeout = time.Second

// Server is one redis-server process on 127.0.0.1.
type Server struct {
	// Addr is host:port, e.g. "127.0.0.1:40123".
	Addr string
	// Port is the TCP port.
	Port int

	dir   string
	head  []string // arguments that must come first (a config file)
	extra []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *bytes.Buffer
	paused bool
}

// NewServer starts a redis-server on a free loopback port. extraArgs are
// appended to its command line (e.g. "--cluster-enabled", "yes"). The caller
// must Close it; in tests prefer Start.
func NewServer(extraArgs ...string) (*Server, error) {
	if _, err := exec.LookPath(Binary); err != nil {
		return nil, ErrNoRedis
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, extra: extraArgs}
	if err := s.launch(nil); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// launch starts the process on a free port. A free port can be taken
// between probe and bind, so it tries a few. Before each try, prepare (if
// set) may write files into the server's directory and returns the
// arguments that must come first on the command line.
func (s *Server) launch(prepare func() ([]string, error)) error {
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := FreePort()
		if err != nil {
			return err
		}
		s.Port, s.Addr = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if prepare != nil {
			if s.head, err = prepare(); err != nil {
				return err
			}
		}
		if lastErr = s.start(); lastErr == nil {
			return nil
		}
	}
	return lastErr
}

// Start is NewServer for a test: it fails tb when the server cannot start
// and closes it in tb.Cleanup.
func Start(tb testing.TB, extraArgs ...string) *Server {
	tb.Helper()
	s, err := NewServer(extraArgs...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// StartN starts n independent servers (Redlock, fault tests).
func StartN(tb testing.TB, n int, extraArgs ...string) []*Server {
	tb.Helper()
	out := make([]*Server, n)
	for i := range out {
		out[i] = Start(tb, extraArgs...)
	}
	return out
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call,
// for the other servers a test starts beside Redis. (Another process can
// take it before it is bound: retry on a bind error.)
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", "",
	}
	return append(a, s.extra...)
}

func (s *Server) start() error {
	cmd := exec.Command(Binary, append(slices.Clone(s.head), s.args()...)...)
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", Binary, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.log, s.paused = cmd, exited, log, false
	s.mu.Unlock()
	if err := s.waitReady(exited, cmd.Process.Pid); err != nil {
		s.kill()
		return err
	}
	return nil
}

// waitReady polls the server until it answers, the process exits, or
// startTimeout passes. The answer must come from process pid: a port taken
// between FreePort and the bind (by a server of a test running in
// parallel, or one restarting on the port it had) answers too, while this
// process exits unable to bind.
func (s *Server) waitReady(exited chan struct{}, pid int) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("redistest: redis-server on %s exited: %s", s.Addr, s.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if answered := infoValue(info, "process_id"); answered != strconv.Itoa(pid) {
				return fmt.Errorf("redistest: %s is another redis-server's (process %s, not %d)", s.Addr, answered, pid)
			}
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redistest: redis-server on %s did not answer within %v", s.Addr, startTimeout)
}

// Options returns go-redis options for the server with short timeouts, so
// that fault tests fail fast.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:         s.Addr,
		DialTimeout:  clientTimeout,
		ReadTimeout:  clientTimeout,
		WriteTimeout: clientTimeout,
		MaxRetries:   -1,
	}
}

// Client returns a client for the server (see Options), closed in
// tb.Cleanup.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(s.Options())
	tb.Cleanup(func() { c.Close() })
	return c
}

// URL returns redis://127.0.0.1:port/0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Stop kills the process (SIGKILL, as a crash would); the port stays
// reserved for Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.kill()
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited, paused := s.cmd, s.exited, s.paused
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if paused {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	cmd.Process.Kill()
	<-exited
}

// Restart stops the server if running and starts it again on the same port,
// empty (there is no persistence).
func (s *Server) Restart() error {
	s.kill()
	return s.start()
}

// Pause stops the process with SIGSTOP: it keeps its connections but
// answers nothing until Resume. Redis's own clock keeps running, so keys
// whose TTL passes during the pause are expired when it resumes.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.paused = paused
	return nil
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	s.kill()
	return os.RemoveAll(s.dir)
}

// Dir is the server's working directory (config files, cluster state).
func (s *Server) Dir() string { return s.dir }

// writeFile writes a file into the server directory.
func writeFile(dir, name, content string) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(content), 0o600)
}

// infoValue is the value of field name in an INFO reply ("" when absent).
func infoValue(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v
		}
	}
	return ""
}
