package main

import (
	"context"
	"net"

	"github.com/lockgate/lockgate/example/seckill"
)

// serveGRPC serves the gRPC API on addr (nothing when addr is empty) and
// returns its graceful stop; a serve error goes to errc.
func serveGRPC(cfg seckill.Config, addr string, errc chan<- error) (func(context.Context) error, error) {
	if addr == "" {
		return func(context.Context) error { return nil }, nil
	}
	srv, err := seckill.NewGRPCServer(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
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
	}, nil
}
