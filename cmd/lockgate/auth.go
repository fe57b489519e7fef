package main

import (
	"fmt"
	"os"
	"strings"
)

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
	// passwordFrom names where password came from ("-password", "the
	// -url", a variable's name), "" when none was given.
	passwordFrom string
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
		cr.password, cr.passwordFrom = c.password, "-password"
	case cr.password != "":
		cr.passwordFrom = "the -url"
	default:
		cr.password, cr.passwordFrom = firstEnv(envPassword, envRedisCLIAuth)
	}
	if cr.password == "" {
		cr.passwordFrom = "" // -password= given empty: no password
	}
	if len(c.sentinel) > 0 {
		cr.sentinelUser = c.sentinelUser
		cr.sentinelPassword, _ = firstEnv(envSentinelPassword)
	}
	return cr
}

// firstEnv returns the value of the first of names set and not empty,
// and that name; "", "" when none is.
func firstEnv(names ...string) (value, name string) {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v, n
		}
	}
	return "", ""
}

// authHint adds to err, when Redis refused the client's credentials
// (WRONGPASS) or wanted some (NOAUTH), the user sent and where its
// password came from, never the password: the first thing to check. When
// go-redis says the sentinels refused, it names the sentinels' user and
// variable instead.
func authHint(err error, c *config) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if !strings.Contains(msg, "WRONGPASS") && !strings.Contains(msg, "NOAUTH") {
		return err
	}
	cr := c.creds
	user, from, set := cr.user, cr.passwordFrom, envPassword
	if len(c.sentinel) > 0 && strings.Contains(msg, "sentinels") {
		user, from, set = cr.sentinelUser, "", envSentinelPassword
		if cr.sentinelPassword != "" {
			from = envSentinelPassword
		}
		if user == "" {
			user = "default"
		}
		if from != "" {
			return fmt.Errorf("%w (authentication to the sentinels failed: user %s, the password from %s)", err, user, from)
		}
		return fmt.Errorf("%w (authentication to the sentinels failed: user %s and no password; set %s)", err, user, set)
	}
	if user == "" {
		user = "default"
	}
	if from != "" {
		return fmt.Errorf("%w (authentication failed: user %s, the password from %s)", err, user, from)
	}
	return fmt.Errorf("%w (authentication failed: user %s and no password; set %s, or give it in -url or -password)", err, user, set)
}
