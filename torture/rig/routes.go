package rig

import (
	"context"
	"net"
	"strings"
	"time"
)

// routed returns a dialer that connects to the proxy routes names for an
// address ("addr=proxy,addr=proxy"), and to the address itself otherwise:
// a worker's own path to each Redis node, whatever address the client
// learns it by (a Sentinel's answer, a Cluster's slot map, a MOVED).
func routed(routes string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	via := map[string]string{}
	for _, r := range strings.Split(routes, ",") {
		if from, to, ok := strings.Cut(r, "="); ok {
			via[from] = to
		}
	}
	d := &net.Dialer{Timeout: time.Second, KeepAlive: 5 * time.Minute}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := via[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
}
