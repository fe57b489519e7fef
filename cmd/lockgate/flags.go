package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockgate/lockgate/core"
)

// config holds the global flags: where Redis is, how to authenticate and
// encrypt, and how long the command may take. parseGlobal fills creds and
// the URL's fields from the flags, the -url and the environment.
type config struct {
	addr         string
	url          string
	cluster      []string
	sentinel     []string
	master       string
	user         string
	password     string
	sentinelUser string
	db           int
	prefix       string
	timeout      time.Duration
	tls          tlsFlags

	creds      credentials // what is sent: resolveCredentials
	clientName string      // from the -url's query
	protocol   int         // from the -url's query; 0: go-redis's default
}

// globalFlags returns the flag set of the global flags, writing into c.
func globalFlags(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("lockgate", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:6379", "a single Redis server at `host:port`")
	fs.StringVar(&c.url, "url", "", "a single Redis server as a `URL`: redis://[user:password@]host:port[/db], or rediss://... for TLS; not with -addr, -cluster or -sentinel. "+
		"A password in it shows in ps like -password: leave it out and set "+envPassword)
	fs.Func("cluster", "a Redis Cluster: some of its `nodes`, host:port,host:port (the others are discovered)", listFlag(&c.cluster))
	fs.Func("sentinel", "a Sentinel deployment: its sentinels' `addresses`, host:port,...; needs -master", listFlag(&c.sentinel))
	fs.StringVar(&c.master, "master", "", "the `name` of the master the sentinels monitor (with -sentinel)")
	fs.StringVar(&c.user, "user", "", "the ACL `user` to authenticate as (AUTH user password); default the -url's user, else Redis's default user")
	fs.StringVar(&c.password, "password", "", "Redis `password` (AUTH). Other users of the machine see it in ps: prefer the environment variable "+
		envPassword+" (or redis-cli's "+envRedisCLIAuth+"); this flag wins over the -url's password, which wins over the variables")
	fs.StringVar(&c.sentinelUser, "sentinel-user", "", "the ACL `user` to authenticate to the sentinels as, when they require one (with -sentinel; their password: "+envSentinelPassword+")")
	fs.IntVar(&c.db, "db", 0, "Redis logical `database` (not with -cluster); given with -url, it wins over the URL's /db")
	fs.StringVar(&c.prefix, "prefix", core.DefaultPrefix, "the key `prefix` of the Lockers whose locks to show (their core.WithPrefix)")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "the `deadline` of the whole command, connecting included")
	c.tls.register(fs)
	return fs
}

// listFlag parses a comma-separated list of addresses into *dst.
func listFlag(dst *[]string) func(string) error {
	return func(s string) error {
		var out []string
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				out = append(out, a)
			}
		}
		if len(out) == 0 {
			return errors.New("no address given")
		}
		*dst = out
		return nil
	}
}

// parseGlobal parses the global flags at the head of args and checks that
// they describe one deployment. It returns the rest: the command and its
// arguments. flag.ErrHelp means -h was given.
func parseGlobal(args []string) (*config, []string, error) {
	c := &config{}
	fs := quiet(globalFlags(c))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, err
		}
		return nil, nil, usageErr("%v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["url"] && (set["addr"] || set["cluster"] || set["sentinel"]):
		return nil, nil, usageErr("-url names a single server: drop -addr, -cluster and -sentinel (for those, use -tls, -user and %s)", envPassword)
	case set["cluster"] && set["sentinel"]:
		return nil, nil, usageErr("-cluster and -sentinel exclude each other")
	case set["addr"] && (set["cluster"] || set["sentinel"]):
		return nil, nil, usageErr("-addr is for a single server: drop it with -cluster or -sentinel")
	case set["sentinel"] && c.master == "":
		return nil, nil, usageErr("-sentinel needs -master, the name of the monitored master")
	case set["master"] && !set["sentinel"]:
		return nil, nil, usageErr("-master is for Sentinel: give the sentinels with -sentinel")
	case set["sentinel-user"] && !set["sentinel"]:
		return nil, nil, usageErr("-sentinel-user is for Sentinel: give the sentinels with -sentinel")
	case set["cluster"] && c.db != 0:
		return nil, nil, usageErr("-db: a Redis Cluster has database 0 only")
	case c.db < 0:
		return nil, nil, usageErr("-db %d is negative", c.db)
	case c.timeout <= 0:
		return nil, nil, usageErr("-timeout %v is not positive", c.timeout)
	}
	var fromURL credentials
	if set["url"] {
		t, err := parseURL(c.url)
		if err != nil {
			return nil, nil, err
		}
		c.addr, fromURL = t.addr, t.creds
		if !set["db"] {
			if c.db = t.db; c.db < 0 {
				return nil, nil, usageErr("-url %s: database %d is negative", redactURL(c.url), c.db)
			}
		}
		c.tls.enabled = c.tls.enabled || t.tls
		c.tls.insecure = c.tls.insecure || t.skipVerify
		c.clientName, c.protocol = t.clientName, t.protocol
	}
	if err := c.tls.check(set); err != nil {
		return nil, nil, err
	}
	c.creds = resolveCredentials(c, set, fromURL)
	return c, fs.Args(), nil
}

// quiet makes fs print nothing on its own: run reports its errors and
// prints the usage.
func quiet(fs *flag.FlagSet) *flag.FlagSet {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses a command's flags, which may come before, between or
// after its positional arguments (release KEY --force), and returns the
// positional ones. After "--" everything is positional (a key that starts
// with '-').
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageErr("%v", err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// usageError is a wrong invocation: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}
