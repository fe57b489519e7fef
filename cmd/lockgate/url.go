package main

import (
	"errors"
	"net/url"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// urlTarget is what a -url names: one server, the credentials in its user
// info, its database, whether it wants TLS.
type urlTarget struct {
	addr       string
	creds      credentials // user and password only
	db         int
	tls        bool // rediss://
	skipVerify bool // rediss://...?skip_verify=true
	clientName string
	protocol   int
}

// urlParams are the query parameters a -url may carry. go-redis knows
// more (timeouts, retries, pool sizes), but the command's -timeout and its
// own settings would replace them, so they are refused rather than
// ignored.
var urlParams = []string{"client_name", "db", "protocol", "skip_verify"}

// parseURL parses a -url with go-redis's redis.ParseURL: redis:// or
// rediss:// (TLS), [user:password@]host:port (default localhost:6379),
// an optional /db. Its errors are usage errors that never hold the
// password: they show the URL redacted (redactURL), and do not pass on
// url.Parse's reasons when the URL has user info (they may quote it).
func parseURL(raw string) (*urlTarget, error) {
	shown := redactURL(raw)
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return nil, usageErr("-url %s: not a valid URL (the reason is not shown, as it may quote the password; percent-encode the characters / ? # @ %% and spaces in the user and password)", shown)
		}
		reason := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			reason = ue.Err.Error()
		}
		return nil, usageErr("-url %s: not a valid URL: %s", shown, reason)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, usageErr("-url %s: the scheme is %q: want redis:// or rediss:// (TLS)", shown, u.Scheme)
	}
	for k := range u.Query() {
		if !slices.Contains(urlParams, k) {
			return nil, usageErr("-url %s: lockgate does not take the query parameter %q (only %s; its timeouts come from -timeout)", shown, k, strings.Join(urlParams, ", "))
		}
	}
	if u.Scheme == "redis" && u.Query().Has("skip_verify") {
		return nil, usageErr("-url %s: skip_verify is for rediss:// (TLS)", shown)
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		pw, _ := u.User.Password()
		return nil, usageErr("-url %s: %s", shown, scrub(err.Error(), raw, shown, pw))
	}
	t := &urlTarget{
		addr:       opt.Addr,
		creds:      credentials{user: opt.Username, password: opt.Password},
		db:         opt.DB,
		tls:        opt.TLSConfig != nil,
		clientName: opt.ClientName,
		protocol:   opt.Protocol,
	}
	t.skipVerify = t.tls && opt.TLSConfig.InsecureSkipVerify
	return t, nil
}

// redactURL returns raw as errors may show it: its password replaced by
// "xxxxx" (url.URL.Redacted), and the values of query parameters that are
// not urlParams too (a "password=" there). When raw does not parse, or has
// an '@' that url.Parse did not take as the end of user info
// ("alice:secret@host" without a scheme parses as scheme "alice"),
// everything between "://" and its last '@' (the user info, however
// malformed) and everything after the next '?' are replaced.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && (u.User != nil || !strings.Contains(raw, "@")) {
		q, masked := u.Query(), false
		for k, vs := range q {
			if !slices.Contains(urlParams, k) {
				for i := range vs {
					vs[i], masked = "xxxxx", true
				}
			}
		}
		if masked {
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	start, rest := 0, raw
	if at := strings.LastIndex(raw, "@"); at >= 0 {
		if start = strings.Index(raw, "://"); start < 0 || start > at {
			start = 0
		} else {
			start += len("://")
		}
		rest = "xxxxx" + raw[at:]
	} else {
		start = len(raw)
		rest = ""
	}
	shown := raw[:start] + rest
	if i := strings.Index(shown, "?"); i >= 0 {
		shown = shown[:i] + "?xxxxx"
	}
	return shown
}

// scrub returns msg with the raw URL replaced by shown and the password,
// as typed and decoded, by "xxxxx": go-redis's parse errors may quote
// parts of the URL.
func scrub(msg, raw, shown, password string) string {
	msg = strings.ReplaceAll(msg, raw, shown)
	if password == "" {
		return msg
	}
	secrets := []string{password, url.UserPassword("", password).String()[1:], url.QueryEscape(password), url.PathEscape(password)}
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return msg
}
