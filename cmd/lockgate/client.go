package main

import (
	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/core"
)

// newClient returns the go-redis client of the deployment c names: a
// Cluster client for -cluster, a Sentinel failover client for -sentinel,
// else a client of the single server -addr or -url. It authenticates with
// c.creds (the sentinels with their own, when given) and speaks TLS when
// c.tls says so, to every node and sentinel alike. Every call is bounded by
// the command's context (ContextTimeoutEnabled), so by -timeout. A failed
// call is reported rather than retried (the operator reruns the command); a
// Cluster client still follows redirects and retries within MaxRedirects,
// as go-redis does. Retrying a release is safe: core's release script
// answers a copy of a call the same. The pool is small: a command makes one
// call at a time. It fails, before dialling, when -tls-ca-file cannot be
// read.
func newClient(c *config) (redis.UniversalClient, error) {
	tlsConfig, err := c.tls.config()
	if err != nil {
		return nil, err
	}
	addrs := []string{c.addr}
	switch {
	case len(c.cluster) > 0:
		addrs = c.cluster
	case len(c.sentinel) > 0:
		addrs = c.sentinel // with MasterName: a failover client
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 addrs,
		IsClusterMode:         len(c.cluster) > 0, // even for one address
		MasterName:            c.master,
		Username:              c.creds.user,
		Password:              c.creds.password,
		SentinelUsername:      c.creds.sentinelUser,
		SentinelPassword:      c.creds.sentinelPassword,
		TLSConfig:             tlsConfig,
		ClientName:            c.clientName,
		Protocol:              c.protocol,
		DB:                    c.db,
		DialTimeout:           c.timeout,
		ReadTimeout:           c.timeout,
		WriteTimeout:          c.timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		PoolSize:              4,
	}), nil
}

// session is the connection of one command: the client and a Locker on
// it, made on first use so that usage errors never dial.
type session struct {
	cfg    *config
	client redis.UniversalClient
	locker *core.Locker
}

// lockerFor makes the session's Locker (each command calls it once).
func (s *session) lockerFor() (*core.Locker, error) {
	client, err := newClient(s.cfg)
	if err != nil {
		return nil, err
	}
	// A command's calls are bounded by -timeout, not the library's default
	// attempt timeout: an operator waits for an answer.
	opts := []core.Option{core.WithPrefix(s.cfg.prefix), core.WithAttemptTimeout(s.cfg.timeout)}
	if len(s.cfg.sentinel) > 0 {
		// every sentinel refusing is then said at once
		opts = append(opts, core.WithSentinelAddrs(s.cfg.sentinel...))
	}
	l, err := core.New(client, opts...)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.client, s.locker = client, l
	return l, nil
}

// close closes the Locker (which holds nothing) and the client.
func (s *session) close() {
	if s.locker != nil {
		s.locker.Close()
		s.client.Close()
	}
}
