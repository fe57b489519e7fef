package main

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/lockgate/lockgate/example/seckill"
)

// serveGRPC serves the gRPC API on addr (nothing when addr is empty) and
// returns its graceful stop and the address it listens on; a serve error
// goes to errc.
func serveGRPC(cfg seckill.Config, addr string, errc chan<- error) (func(context.Context) error, string, error) {
	if addr == "" {
		return func(context.Context) error { return nil }, "", nil
	}
	srv, err := seckill.NewGRPCServer(cfg)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	go func() { errc <- srv.Serve(ln) }()
	return func(ctx context.Context) error {
		done := make(chan struct{})
		go func() { srv.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			srv.Stop()
			<-done
		}
		return nil
	}, ln.Addr().String(), nil
}

// serveConnect serves the Connect API (seckill.NewConnectServer: HTTP/1.1
// and h2c) on addr (nothing when addr is empty) and returns its graceful
// shutdown and the address it listens on; a serve error goes to errc.
func serveConnect(cfg seckill.Config, addr string, errc chan<- error) (func(context.Context) error, string, error) {
	if addr == "" {
		return func(context.Context) error { return nil }, "", nil
	}
	srv, err := seckill.NewConnectServer(cfg)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	return srv.Shutdown, ln.Addr().String(), nil
}
