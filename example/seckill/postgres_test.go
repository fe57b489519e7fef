package seckill

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
)

// postgresAdminDSN is the server the CI machine runs (trust auth, database
// "test"); LOCKGATE_TEST_POSTGRES overrides it.
func postgresAdminDSN() string {
	if dsn := os.Getenv("LOCKGATE_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// freshPostgres creates a database of its own on the test server and drops
// it when the test ends; it skips the test, with the reason, when no
// server is reachable.
func freshPostgres(t *testing.T) string {
	t.Helper()
	admin := postgresAdminDSN()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("LOCKGATE_TEST_POSTGRES: %v", err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		t.Skipf("PostgreSQL path not tested: no server at %s (%v); the CI machine runs one there", u.Host, err)
	}
	conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		t.Skipf("PostgreSQL path not tested: %s answers but refuses us (%v)", u.Host, err)
	}
	name := "lockgate_example_" + rand.Text()[:10]
	name = toLower(name)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		db.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		db.Close()
	})
	u.Path = "/" + name
	t.Logf("PostgreSQL: database %s on %s", name, u.Host)
	return u.String()
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// TestPostgres runs the store and the scenario on PostgreSQL: fences,
// the redis lock across 3 nodes (0 duplicates, 0 oversold), and the
// no-lock control for information (the issue requires duplicates only on
// the default store; PostgreSQL's result is logged).
func TestPostgres(t *testing.T) {
	dsn := freshPostgres(t)
	t.Run("fence", func(t *testing.T) { testStaleFence(t, openStore(t, dsn)) })
	t.Run("redis lock", func(t *testing.T) {
		srv := redistest.Start(t)
		st := openStore(t, dsn)
		seed(t, st, scenarioStock)
		targets := startNodes(t, scenarioNodes, dsn, nodeOpts{mode: LockRedis, redis: srv})
		res := load(t, targets, scenarioUsers, scenarioDup)
		r := report(t, st)
		if r.Duplicates != 0 || r.Oversold != 0 || r.Orders != scenarioUsers || res.ServerErrors != 0 {
			t.Fatalf("postgres, redis lock: %v, %d 5xx; want %d orders, no duplicates, no 5xx", r, res.ServerErrors, scenarioUsers)
		}
	})
	t.Run("no lock", func(t *testing.T) {
		st := openStore(t, dsn)
		seed(t, st, scenarioStock)
		targets := startNodes(t, scenarioNodes, dsn, nodeOpts{mode: LockNone})
		load(t, targets, scenarioUsers, scenarioDup)
		r := report(t, st)
		t.Logf("postgres, no lock: %v", r)
		if r.Oversold != 0 {
			t.Fatalf("oversold %d", r.Oversold)
		}
	})
	t.Run("unique index", func(t *testing.T) {
		st := openStore(t, dsn)
		seed(t, st, scenarioStock)
		if err := st.EnsureUniqueIndex(context.Background()); err != nil {
			t.Fatal(err)
		}
		targets := startNodes(t, scenarioNodes, dsn, nodeOpts{mode: LockNone})
		res := load(t, targets, scenarioUsers, scenarioDup)
		if r := report(t, st); r.Duplicates != 0 || res.ServerErrors != 0 {
			t.Fatalf("postgres, unique index: %v, %d 5xx", r, res.ServerErrors)
		}
	})
}
