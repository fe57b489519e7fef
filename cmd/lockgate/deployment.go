package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// reached says which deployment the session's client reached, for ping:
// "server HOST:PORT", "Cluster of N masters (seeds ...)" or "Sentinel
// master NAME at HOST:PORT", then ", TLS" (", TLS without certificate
// verification" with -tls-insecure-skip-verify) and ", user NAME" when
// they apply. The Cluster's masters are counted from the slot map ping
// loaded; the Sentinel master's address is the one it answers CLIENT INFO
// with (laddr). What cannot be learnt is left out: ping already succeeded.
func (s *session) reached(ctx context.Context) string {
	c := s.cfg
	var b strings.Builder
	switch {
	case len(c.cluster) > 0:
		b.WriteString("Cluster")
		if cc, ok := s.client.(*redis.ClusterClient); ok {
			var n atomic.Int64
			if cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { n.Add(1); return nil }) == nil {
				fmt.Fprintf(&b, " of %d masters", n.Load())
			}
		}
		fmt.Fprintf(&b, " (seeds %s)", strings.Join(c.cluster, ","))
	case len(c.sentinel) > 0:
		fmt.Fprintf(&b, "Sentinel master %s", c.master)
		if rc, ok := s.client.(*redis.Client); ok {
			if info, err := rc.ClientInfo(ctx).Result(); err == nil && info.LAddr != "" {
				fmt.Fprintf(&b, " at %s", info.LAddr)
			}
		}
	default:
		fmt.Fprintf(&b, "server %s", c.addr)
	}
	switch {
	case c.tls.enabled && c.tls.insecure:
		b.WriteString(", TLS without certificate verification")
	case c.tls.enabled:
		b.WriteString(", TLS")
	}
	if c.creds.user != "" {
		fmt.Fprintf(&b, ", user %s", c.creds.user)
	}
	return b.String()
}
