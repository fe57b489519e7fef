package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// Dialect is the SQL database a Guard writes to.
type Dialect int

// The dialects a Guard speaks.
const (
	// Postgres is PostgreSQL (any database/sql driver: pgx's stdlib,
	// lib/pq), $1 placeholders.
	Postgres Dialect = iota + 1
	// SQLite is SQLite 3.24 or later (modernc.org/sqlite, mattn/go-sqlite3).
	SQLite
	// MySQL is MySQL or MariaDB with InnoDB (go-sql-driver/mysql).
	MySQL
	// MariaDB is MySQL: the same statements.
	MariaDB = MySQL
)

// String returns "postgres", "sqlite" or "mysql".
func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	case MySQL:
		return "mysql"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// DefaultTable is the name of the table of fences unless WithTable gives
// another.
const DefaultTable = "lockgate_fences"

// Option configures a Guard.
type Option func(*options)

type options struct{ table string }

// WithTable names the table of fences: letters, digits and underscores,
// optionally after a schema and a dot ("app.fences"), at most 63 bytes.
// Default DefaultTable ("lockgate_fences"). New fails on any other name.
func WithTable(name string) Option { return func(o *options) { o.table = name } }

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// Guard makes a write to a SQL database conditional on the fence of the
// lease that guards it: Check, called first in the write's transaction,
// records the fence as the highest seen for its resource, or fails with a
// *StaleError when a higher one is recorded already. Its record is a row of
// one table (resource, fence): see DDL and CreateTable.
//
// Check holds that row's write lock until the transaction ends, so that
// transactions guarded on one resource run one after another from their
// Check on, in fence order for as long as the fences arrive in order, and a
// transaction that waited reads, after its Check, what the one before it
// committed. That is what makes a check-then-insert safe when the lock was
// lost: the check reads after Check (see the package doc for each
// database's rules).
//
// A Guard holds no connection and is safe for concurrent use.
type Guard struct {
	dialect Dialect
	table   string
	// upsert records the fence; read reads the row back (locked).
	upsert, read string
}

// New returns the Guard of dialect. Errors: an unknown dialect, a table name
// WithTable refuses.
func New(dialect Dialect, opts ...Option) (*Guard, error) {
	o := options{table: DefaultTable}
	for _, opt := range opts {
		opt(&o)
	}
	if !tableName.MatchString(o.table) || len(o.table) > 63 {
		return nil, fmt.Errorf("fence: table name %q: want letters, digits and underscores, optionally schema.table, at most 63 bytes", o.table)
	}
	g := &Guard{dialect: dialect, table: o.table}
	t := o.table
	switch dialect {
	case Postgres:
		// ON CONFLICT locks the conflicting row whether or not WHERE holds,
		// and in READ COMMITTED it waits for a concurrent writer of the row
		// and judges WHERE on the row that writer committed.
		g.upsert = `INSERT INTO ` + t + ` (resource, fence) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence WHERE ` + t + `.fence <= excluded.fence`
		g.read = `SELECT fence FROM ` + t + ` WHERE resource = $1`
	case SQLite:
		// The transaction's write lock (BEGIN IMMEDIATE, or this first
		// write) is the whole database's: there is no row lock to take.
		g.upsert = `INSERT INTO ` + t + ` (resource, fence) VALUES (?, ?) ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence WHERE ` + t + `.fence <= excluded.fence`
		g.read = `SELECT fence FROM ` + t + ` WHERE resource = ?`
	case MySQL:
		// Rows affected cannot tell an equal fence from a stale one (both
		// leave the row unchanged; clientFoundRows changes the count), so
		// the row is kept at the greater fence and read back with a locking
		// read, which sees the latest committed row whatever the snapshot.
		g.upsert = `INSERT INTO ` + t + ` (resource, fence) VALUES (?, ?) ON DUPLICATE KEY UPDATE fence = GREATEST(fence, VALUES(fence))`
		g.read = `SELECT fence FROM ` + t + ` WHERE resource = ? FOR UPDATE`
	default:
		return nil, fmt.Errorf("fence: unknown dialect %v: want Postgres, SQLite or MySQL", dialect)
	}
	return g, nil
}

// Dialect returns the Guard's dialect.
func (g *Guard) Dialect() Dialect { return g.dialect }

// Table returns the name of the Guard's table.
func (g *Guard) Table() string { return g.table }

// DDL returns the statement that creates the Guard's table when missing, for
// a migration of your own:
//
//	Postgres: CREATE TABLE IF NOT EXISTS lockgate_fences (resource TEXT PRIMARY KEY, fence BIGINT NOT NULL)
//	SQLite:   CREATE TABLE IF NOT EXISTS lockgate_fences (resource TEXT PRIMARY KEY, fence INTEGER NOT NULL)
//	MySQL:    CREATE TABLE IF NOT EXISTS lockgate_fences (resource VARBINARY(1024) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB
//
// The MySQL column is binary so that resources compare byte for byte, as
// lock names do (a case-insensitive collation would merge the fences of
// "Order:1" and "order:1").
func (g *Guard) DDL() string {
	switch g.dialect {
	case Postgres:
		return `CREATE TABLE IF NOT EXISTS ` + g.table + ` (resource TEXT PRIMARY KEY, fence BIGINT NOT NULL)`
	case SQLite:
		return `CREATE TABLE IF NOT EXISTS ` + g.table + ` (resource TEXT PRIMARY KEY, fence INTEGER NOT NULL)`
	default:
		return `CREATE TABLE IF NOT EXISTS ` + g.table + ` (resource VARBINARY(` + strconv.Itoa(MaxResourceLen) + `) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB`
	}
}

// Execer runs a statement: *sql.DB, *sql.Conn and *sql.Tx are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// CreateTable runs DDL on db. Errors: the database's, wrapped.
func (g *Guard) CreateTable(ctx context.Context, db Execer) error {
	if _, err := db.ExecContext(ctx, g.DDL()); err != nil {
		return fmt.Errorf("fence: create table %s: %w", g.table, err)
	}
	return nil
}

// Check records fence as the highest seen for resource, inside tx, and
// holds the record's row lock until tx ends. Call it first in the
// transaction of the write it guards, before the reads the write depends on,
// with the lease's key and fence (lease.Key(), lease.Fence()); then read,
// write and commit as usual.
//
// A fence equal to the recorded one passes (the same lease writing again). A
// lower one fails with a *StaleError (errors.Is(err, ErrStale)), and tx must
// be rolled back. While another transaction holds the record, Check waits for
// it (PostgreSQL, MySQL: the row lock; SQLite: the database's write lock, at
// BEGIN IMMEDIATE or here), within ctx and the database's lock timeout.
//
// Errors: *StaleError; ErrInvalid (wrapped) for a fence <= 0 or a resource
// that is empty or over MaxResourceLen bytes, before any statement; the
// database's, wrapped, e.g. a serialization failure or a deadlock, after
// which tx must be rolled back too (and the transaction may be tried again).
func (g *Guard) Check(ctx context.Context, tx *sql.Tx, resource string, fence int64) error {
	if err := checkArgs(resource, fence); err != nil {
		return err
	}
	if tx == nil {
		return errors.New("fence: Check needs the write's transaction, got a nil *sql.Tx")
	}
	res, err := tx.ExecContext(ctx, g.upsert, resource, fence)
	if err != nil {
		return fmt.Errorf("fence: record fence %d of %q: %w", fence, resource, err)
	}
	if g.dialect == MySQL {
		// The row is this transaction's now (locked), so the locking read
		// returns its latest value: the greater of fence and the one
		// recorded before.
		var highest int64
		if err := tx.QueryRowContext(ctx, g.read, resource).Scan(&highest); err != nil {
			return fmt.Errorf("fence: read fence of %q: %w", resource, err)
		}
		if highest > fence {
			return &StaleError{Resource: resource, Fence: fence, Highest: highest}
		}
		return nil
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("fence: record fence %d of %q: %w", fence, resource, err)
	}
	if n > 0 {
		return nil
	}
	// Not updated: a higher fence is recorded. The row is locked by this
	// transaction all the same; read it for the error (0 if that fails).
	e := &StaleError{Resource: resource, Fence: fence}
	if err := tx.QueryRowContext(ctx, g.read, resource).Scan(&e.Highest); err != nil {
		e.Highest = 0
	}
	return e
}
