package main

import "os"

// The environment variables the passwords are read from, so that they do
// not show in ps as a -password flag would. An empty variable counts as
// unset.
const (
	// envPassword is the password of the Redis servers (AUTH): of the
	// single server, of every Cluster node, of the master behind Sentinel.
	envPassword = "LOCKGATE_REDIS_PASSWORD"
	// envRedisCLIAuth is redis-cli's own variable for the same password,
	// read when envPassword is not set.
	envRedisCLIAuth = "REDISCLI_AUTH"
	// envSentinelPassword is the sentinels' own password (with -sentinel),
	// when they require one.
	envSentinelPassword = "LOCKGATE_SENTINEL_PASSWORD"
)

// credentials are the user and password sent to the servers, and to the
// sentinels.
type credentials struct {
	user, password                 string
	sentinelUser, sentinelPassword string
}

// resolveCredentials picks each credential from the first place that has
// it: the flag if given (even empty), else the URL's user info, else the
// environment (LOCKGATE_REDIS_PASSWORD, then REDISCLI_AUTH; the user has
// no variable). The sentinels' password comes from
// LOCKGATE_SENTINEL_PASSWORD only, and only with -sentinel.
func resolveCredentials(c *config, set map[string]bool, fromURL credentials) credentials {
	cr := credentials{user: fromURL.user, password: fromURL.password}
	if set["user"] {
		cr.user = c.user
	}
	switch {
	case set["password"]:
		cr.password = c.password
	case cr.password != "":
	default:
		cr.password = firstEnv(envPassword, envRedisCLIAuth)
	}
	if len(c.sentinel) > 0 {
		cr.sentinelUser = c.sentinelUser
		cr.sentinelPassword = firstEnv(envSentinelPassword)
	}
	return cr
}

// firstEnv returns the value of the first of names set and not empty.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
