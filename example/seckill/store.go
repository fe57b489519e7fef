package seckill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	_ "modernc.org/sqlite"             // database/sql driver "sqlite"

	"github.com/lockgate/lockgate/fence"
)

// Store is the SQL database of vouchers, orders and the orders' fences. It
// is safe for concurrent use.
type Store struct {
	db       *sql.DB
	postgres bool
	// guard records the fences of the orders' leases (fence.Guard, table
	// lockgate_fences).
	guard *fence.Guard
}

// BusyTimeout is how long a SQLite connection waits for another writer
// (of this or another process) before failing with SQLITE_BUSY.
const BusyTimeout = 30 * time.Second

// IsPostgres reports whether dsn names a PostgreSQL database
// (postgres:// or postgresql://); anything else is a SQLite file path.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open opens the database named by dsn — a SQLite file path (created when
// missing) or a postgres:// URL — and creates the tables when missing
// (vouchers, orders, and the fence guard's lockgate_fences; no unique index
// on orders(user_id, voucher_id)). Errors: an empty dsn, an unreachable or unusable database.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if dsn == "" {
		return nil, errors.New("seckill: -db is empty: give a SQLite file path or a postgres:// URL")
	}
	s := &Store{postgres: IsPostgres(dsn)}
	dialect := fence.SQLite
	if s.postgres {
		dialect = fence.Postgres
	}
	var err error
	if s.guard, err = fence.New(dialect); err != nil {
		return nil, err
	}
	if s.postgres {
		s.db, err = sql.Open("pgx", dsn)
		if err == nil {
			s.db.SetMaxOpenConns(16)
		}
	} else {
		s.db, err = sql.Open("sqlite", sqliteDSN(dsn))
		if err == nil {
			// Few connections: waiting in Go's pool is fairer than SQLite's
			// sleep-and-retry busy handler.
			s.db.SetMaxOpenConns(4)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("seckill: open %s: %w", redact(dsn), err)
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// sqliteDSN turns a file path into a modernc.org/sqlite DSN: WAL so that
// readers never block the writer, a busy timeout so that writers of other
// processes are waited for, and BEGIN IMMEDIATE for transactions so that a
// writer takes the write lock up front (a deferred transaction that
// upgrades from reading fails at once with SQLITE_BUSY in WAL mode).
func sqliteDSN(path string) string {
	q := "_pragma=busy_timeout(" + strconv.Itoa(int(BusyTimeout/time.Millisecond)) + ")" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)&_txlock=immediate"
	if strings.HasPrefix(path, "file:") {
		if strings.Contains(path, "?") {
			return path + "&" + q
		}
		return path + "?" + q
	}
	return "file:" + path + "?" + q
}

// redact hides a password in a postgres URL for error messages.
func redact(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		if j := strings.Index(dsn[i+3:], "@"); j >= 0 {
			if k := strings.Index(dsn[i+3:i+3+j], ":"); k >= 0 {
				return dsn[:i+3+k] + ":***" + dsn[i+3+j:]
			}
		}
	}
	return dsn
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// DB returns the underlying database (for tests and tools).
func (s *Store) DB() *sql.DB { return s.db }

// q rewrites ? placeholders as $1, $2... for PostgreSQL.
func (s *Store) q(query string) string {
	if !s.postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

func (s *Store) migrate(ctx context.Context) error {
	id := "INTEGER PRIMARY KEY AUTOINCREMENT"
	ts := "TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP"
	if s.postgres {
		id = "BIGSERIAL PRIMARY KEY"
		ts = "TIMESTAMPTZ NOT NULL DEFAULT now()"
	}
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS vouchers (
			id BIGINT PRIMARY KEY,
			stock BIGINT NOT NULL,
			initial_stock BIGINT NOT NULL
		)`,
		`CREATE TABLE IF NOT EXISTS orders (
			id ` + id + `,
			user_id BIGINT NOT NULL,
			voucher_id BIGINT NOT NULL,
			fence BIGINT NOT NULL DEFAULT 0,
			created_at ` + ts + `
		)`,
		// Not unique: the lock is what must prevent duplicates (see
		// EnsureUniqueIndex for the backstop).
		`CREATE INDEX IF NOT EXISTS orders_user_voucher ON orders (user_id, voucher_id)`,
		// One row per lock key: the highest fence that wrote (Guard.Check).
		s.guard.DDL(),
	}
	for _, st := range stmts {
		if err := s.exec(ctx, st); err != nil {
			return fmt.Errorf("seckill: create schema: %w", err)
		}
	}
	return nil
}

// exec runs a DDL statement, retrying a bounded number of times when
// several processes create the schema of one PostgreSQL database at once
// (concurrent CREATE ... IF NOT EXISTS can collide on the catalog).
func (s *Store) exec(ctx context.Context, st string) error {
	var err error
	for try := 0; try < 5; try++ {
		if _, err = s.db.ExecContext(ctx, st); err == nil || !isUniqueViolation(err) {
			return err
		}
	}
	return err
}

// EnsureUniqueIndex adds the unique index on orders(user_id, voucher_id):
// the database backstop of an availability-first ("AP") mode (serve -unique-index). It
// fails when the orders already hold duplicates.
func (s *Store) EnsureUniqueIndex(ctx context.Context) error {
	if err := s.exec(ctx, `CREATE UNIQUE INDEX IF NOT EXISTS orders_one_per_user ON orders (user_id, voucher_id)`); err != nil {
		return fmt.Errorf("seckill: create unique index: %w", err)
	}
	return nil
}

// Seed sets voucher id's stock to stock and deletes its orders and order
// fences, so that a scenario starts from fresh data. Errors: stock < 0,
// database errors.
func (s *Store) Seed(ctx context.Context, voucherID, stock int64) error {
	if voucherID <= 0 {
		return errors.New("seckill: voucher must be a positive integer")
	}
	if stock < 0 {
		return errors.New("seckill: stock must not be negative")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM orders WHERE voucher_id = ?`), voucherID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+s.guard.Table()+` WHERE resource LIKE ?`), "order:%:"+strconv.FormatInt(voucherID, 10)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM vouchers WHERE id = ?`), voucherID); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO vouchers (id, stock, initial_stock) VALUES (?, ?, ?)`), voucherID, stock, stock); err != nil {
		return err
	}
	return tx.Commit()
}

// Voucher is the state of a voucher as GET /vouchers/{id} shows it.
type Voucher struct {
	ID     int64 `json:"id"`
	Stock  int64 `json:"stock"`
	Orders int64 `json:"orders"`
}

// Voucher returns voucher id with its stock and number of orders.
// Errors: ErrUnknownVoucher, database errors.
func (s *Store) Voucher(ctx context.Context, id int64) (Voucher, error) {
	v := Voucher{ID: id}
	err := s.db.QueryRowContext(ctx, s.q(`SELECT stock, (SELECT COUNT(*) FROM orders WHERE voucher_id = ?) FROM vouchers WHERE id = ?`), id, id).Scan(&v.Stock, &v.Orders)
	if errors.Is(err, sql.ErrNoRows) {
		return v, ErrUnknownVoucher
	}
	return v, err
}

// VoucherExists reports whether voucher id exists.
func (s *Store) VoucherExists(ctx context.Context, id int64) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, s.q(`SELECT 1 FROM vouchers WHERE id = ?`), id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// isUniqueViolation reports a unique-constraint error of either database.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "23505"
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// Report counts a voucher's orders against the one-order-per-user rule and
// its initial stock.
type Report struct {
	// Orders is the number of orders of the voucher.
	Orders int64
	// Duplicates is the number of orders beyond one per user.
	Duplicates int64
	// Oversold is the number of orders beyond the voucher's initial stock.
	Oversold int64
}

// String formats r exactly as `seckill report` prints it:
// "orders=N duplicates=N oversold=N".
func (r Report) String() string {
	return fmt.Sprintf("orders=%d duplicates=%d oversold=%d", r.Orders, r.Duplicates, r.Oversold)
}

// Report computes the Report of voucher id. Errors: ErrUnknownVoucher,
// database errors.
func (s *Store) Report(ctx context.Context, voucherID int64) (Report, error) {
	var r Report
	var initial, users int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT initial_stock FROM vouchers WHERE id = ?`), voucherID).Scan(&initial)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrUnknownVoucher
	}
	if err != nil {
		return r, err
	}
	err = s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*), COUNT(DISTINCT user_id) FROM orders WHERE voucher_id = ?`), voucherID).Scan(&r.Orders, &users)
	if err != nil {
		return r, err
	}
	r.Duplicates = r.Orders - users
	if r.Orders > initial {
		r.Oversold = r.Orders - initial
	}
	return r, nil
}

// Kind returns "postgres" or "sqlite".
func (s *Store) Kind() string {
	if s.postgres {
		return "postgres"
	}
	return "sqlite"
}
