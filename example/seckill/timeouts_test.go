package seckill

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTimeouts: every HTTP stack, and the Connect server, gets the
// Timeouts, zero fields their defaults (2s header, 5s request, 15s answer,
// 60s idle); a negative one, a header timeout over the request timeout, or
// an answer timeout not longer than the lock wait is an error of the
// constructors.
func TestTimeouts(t *testing.T) {
	st := openStore(t, "")
	base := Config{Service: &Service{Store: st}, Mode: LockNone}

	srv, err := NewHTTPServer(base)
	if err != nil {
		t.Fatal(err)
	}
	if srv.ReadHeaderTimeout != 2*time.Second || srv.ReadTimeout != 5*time.Second || srv.WriteTimeout != 15*time.Second ||
		srv.IdleTimeout != 60*time.Second || srv.MaxHeaderBytes != MaxHeaderBytes {
		t.Fatalf("net/http defaults: header %v, read %v, write %v, idle %v, max header %d",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
	app, err := NewFiberApp(base)
	if err != nil {
		t.Fatal(err)
	}
	if c := app.Config(); c.ReadTimeout != 2*time.Second || c.WriteTimeout != 15*time.Second || c.IdleTimeout != 60*time.Second ||
		!c.DisablePreParseMultipartForm || c.StreamRequestBody || c.UnescapePath || c.ReadBufferSize != 4096 {
		t.Fatalf("fiber defaults: %+v", c)
	}
	if s := app.Server(); s.HeaderReceived == nil || s.HeaderReceived(nil).ReadTimeout != 3*time.Second || !s.CloseOnShutdown {
		t.Fatal("fiber: the body does not get the request timeout minus the header timeout, or CloseOnShutdown is off")
	}

	// The other net/http stacks and Connect: the same server settings.
	servers := map[string]func(Config) (*http.Server, error){
		"connect": NewConnectServer,
	}
	for _, stack := range []string{StackChi, StackGin, StackEcho, StackEchoV5} {
		servers[stack] = func(cfg Config) (*http.Server, error) {
			s, err := NewStackServer(cfg, stack)
			if err != nil {
				return nil, err
			}
			return s.(*http.Server), nil
		}
	}
	for name, newServer := range servers {
		srv, err := newServer(base)
		if err != nil {
			t.Fatal(err)
		}
		if srv.ReadHeaderTimeout != 2*time.Second || srv.ReadTimeout != 5*time.Second || srv.WriteTimeout != 15*time.Second ||
			srv.IdleTimeout != 60*time.Second || srv.MaxHeaderBytes != MaxHeaderBytes {
			t.Fatalf("%s defaults: header %v, read %v, write %v, idle %v, max header %d",
				name, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
		}
	}
	if p := func() *http.Protocols { s, _ := NewConnectServer(base); return s.Protocols }(); p == nil || !p.HTTP1() || !p.UnencryptedHTTP2() {
		t.Fatalf("Connect server protocols %v, want HTTP/1.1 and h2c", p)
	}
	app3, err := NewFiberV3App(base)
	if err != nil {
		t.Fatal(err)
	}
	if c := app3.Config(); c.ReadTimeout != 2*time.Second || c.WriteTimeout != 15*time.Second || c.IdleTimeout != 60*time.Second ||
		!c.DisablePreParseMultipartForm || c.StreamRequestBody || c.UnescapePath || c.ReadBufferSize != 4096 {
		t.Fatalf("fiber v3 defaults: %+v", c)
	}
	if s := app3.Server(); s.HeaderReceived == nil || s.HeaderReceived(nil).ReadTimeout != 3*time.Second || !s.CloseOnShutdown {
		t.Fatal("fiber v3: the body does not get the request timeout minus the header timeout, or CloseOnShutdown is off")
	}

	custom := base
	custom.Timeouts = Timeouts{ReadHeader: time.Second, Read: 3 * time.Second, Write: 4 * time.Second, Idle: 7 * time.Second}
	if srv, err := NewHTTPServer(custom); err != nil || srv.ReadHeaderTimeout != time.Second || srv.ReadTimeout != 3*time.Second ||
		srv.WriteTimeout != 4*time.Second || srv.IdleTimeout != 7*time.Second {
		t.Fatalf("custom: %+v, %v", srv, err)
	}

	for _, c := range []struct {
		name string
		to   Timeouts
		wait time.Duration
		want string
	}{
		{"negative", Timeouts{Idle: -time.Second}, 0, "Timeouts.Idle"},
		{"header over request", Timeouts{ReadHeader: 6 * time.Second}, 0, "Timeouts.ReadHeader"},
		{"answer within the wait", Timeouts{Write: 2 * time.Second}, 0, "Timeouts.Write"},
		{"answer within a longer wait", Timeouts{}, 20 * time.Second, "Timeouts.Write"},
	} {
		cfg := base
		cfg.Timeouts, cfg.Wait = c.to, c.wait
		errs := []error{}
		for _, stack := range Stacks {
			_, err := NewStackServer(cfg, stack)
			errs = append(errs, err)
		}
		_, err := NewConnectServer(cfg)
		errs = append(errs, err)
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s (server %d): %v, want an error naming %s", c.name, i, err, c.want)
			}
		}
	}
}
