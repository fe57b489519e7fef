// Package drivertest runs the fence guard (package fence) on the real
// databases, through their database/sql drivers: PostgreSQL (pgx), MariaDB
// or MySQL (go-sql-driver/mysql) and SQLite (modernc.org/sqlite). It is a
// module of its own so that the drivers stay out of lockgate's go.mod; it
// holds tests and a runnable Example only.
//
// The tests make a database of their own on the PostgreSQL server at
// 127.0.0.1:5432 (user postgres, database test; LOCKGATE_TEST_POSTGRES
// overrides the URL) and on the MariaDB server at 127.0.0.1:3306 (root
// without a password; LOCKGATE_TEST_MYSQL overrides the DSN), and drop it
// at the end; a test whose server does not answer is skipped, saying so.
package drivertest
