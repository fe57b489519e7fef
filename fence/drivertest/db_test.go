package drivertest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"modernc.org/sqlite"               // database/sql driver "sqlite"

	"github.com/lockgate/lockgate/fence"
)

// database is one test database with its guard and a table of items the
// guarded writes insert into: (resource, fence), no constraint.
type database struct {
	name  string
	path  string // SQLite's file
	db    *sql.DB
	guard *fence.Guard
}

// forEachDB runs f on a fresh database of each dialect: SQLite, PostgreSQL,
// MariaDB (skipped, saying why, when its server does not answer).
func forEachDB(t *testing.T, f func(t *testing.T, d *database)) {
	for _, open := range []func(*testing.T) *database{openSQLite, openPostgres, openMariaDB} {
		d := open(t)
		if d == nil {
			continue
		}
		t.Run(d.name, func(t *testing.T) { f(t, d) })
	}
}

// sqliteDSN is the DSN the package doc recommends: WAL, a busy timeout,
// and transactions that take the write lock at BEGIN (IMMEDIATE).
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

func openSQLite(t *testing.T) *database {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fence.db")
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d := setup(t, "sqlite", db, fence.SQLite)
	d.path = path
	return d
}

func postgresAdminDSN() string {
	if dsn := os.Getenv("LOCKGATE_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func mysqlAdminDSN() string {
	if dsn := os.Getenv("LOCKGATE_TEST_MYSQL"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// reachable skips t when nothing listens at host:port.
func reachable(t *testing.T, what, hostport string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", hostport, time.Second)
	if err != nil {
		t.Logf("%s not tested: no server at %s (%v); the CI machine runs one there", what, hostport, err)
		return false
	}
	conn.Close()
	return true
}

func dbName() string { return "lockgate_fence_" + strings.ToLower(rand.Text()[:10]) }

func openPostgres(t *testing.T) *database {
	t.Helper()
	admin := postgresAdminDSN()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("LOCKGATE_TEST_POSTGRES: %v", err)
	}
	if !reachable(t, "PostgreSQL", u.Host) {
		return nil
	}
	name := createDB(t, "pgx", admin, "DROP DATABASE IF EXISTS %s WITH (FORCE)")
	u.Path = "/" + name
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return setup(t, "postgres", db, fence.Postgres)
}

func openMariaDB(t *testing.T) *database {
	t.Helper()
	admin := mysqlAdminDSN()
	cfg, err := mysql.ParseDSN(admin)
	if err != nil {
		t.Fatalf("LOCKGATE_TEST_MYSQL: %v", err)
	}
	if !reachable(t, "MariaDB", cfg.Addr) {
		return nil
	}
	cfg.DBName = createDB(t, "mysql", admin, "DROP DATABASE IF EXISTS %s")
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return setup(t, "mariadb", db, fence.MySQL)
}

// createDB creates a database of the test's own on the server of admin and
// drops it (drop, a format with one %s) when the test ends.
func createDB(t *testing.T, driver, admin, drop string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open(driver, admin)
	if err != nil {
		t.Fatal(err)
	}
	name := dbName()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		db.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, fmt.Sprintf(drop, name)); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		db.Close()
	})
	return name
}

// setup creates the guard's table and the items table.
func setup(t *testing.T, name string, db *sql.DB, dialect fence.Dialect) *database {
	t.Helper()
	db.SetMaxOpenConns(40)
	g, err := fence.New(dialect)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE items (resource VARCHAR(200) NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &database{name: name, db: db, guard: g}
}

// q writes ? placeholders as $1, $2… on PostgreSQL.
func (d *database) q(query string) string {
	if d.guard.Dialect() != fence.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// count is the "check" of a check-then-insert: the items of resource.
func (d *database) count(t *testing.T, q querier, resource string) int {
	t.Helper()
	var n int
	if err := q.QueryRowContext(context.Background(), d.q(`SELECT COUNT(*) FROM items WHERE resource = ?`), resource).Scan(&n); err != nil {
		t.Error(err)
	}
	return n
}

// insert is the guarded write.
func (d *database) insert(q querier, resource string, f int64) error {
	_, err := q.ExecContext(context.Background(), d.q(`INSERT INTO items (resource, fence) VALUES (?, ?)`), resource, f)
	return err
}

// items returns the fences of resource's items, in insertion order.
func (d *database) items(t *testing.T, resource string) []int64 {
	t.Helper()
	rows, err := d.db.QueryContext(context.Background(), d.q(`SELECT fence FROM items WHERE resource = ?`), resource)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// begin starts a transaction (on SQLite it waits for the write lock: the
// DSN's _txlock=immediate).
func (d *database) begin(t *testing.T, opts *sql.TxOptions) *sql.Tx {
	t.Helper()
	tx, err := d.db.BeginTx(context.Background(), opts)
	if err != nil {
		t.Error(err)
		return nil
	}
	return tx
}

// waitBlocked waits (bounded) until n transactions of the database wait
// for a row lock: PostgreSQL and MariaDB report it; SQLite's writers wait
// in BEGIN IMMEDIATE's busy handler, which nothing reports, and the
// outcome of the tests does not depend on it there.
func (d *database) waitBlocked(t *testing.T, n int) {
	t.Helper()
	var query string
	switch d.guard.Dialect() {
	case fence.Postgres:
		query = `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
	case fence.MySQL:
		query = `SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`
	default:
		return
	}
	// InnoDB's INNODB_TRX is a cache refreshed only when it was last read
	// more than 100ms before: poll it slower than that.
	poll := 10 * time.Millisecond
	if d.guard.Dialect() == fence.MySQL {
		poll = 150 * time.Millisecond
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		if err := d.db.QueryRowContext(context.Background(), query).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions wait for a lock after 10s, want %d", got, n)
		}
		time.Sleep(poll)
	}
}

// retryable reports the errors after which a transaction is tried again:
// serialization failures and deadlocks (PostgreSQL, MySQL) and SQLite's
// busy database.
func retryable(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "40001" || pg.Code == "40P01"
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number == 1213
	}
	return sqliteBusy(err)
}

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY, or one of its
// extended codes (SQLITE_BUSY_SNAPSHOT, 517: a write in a transaction whose
// snapshot is no longer the latest).
func sqliteBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == 5
}
