package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/lockgate/lockgate/example/seckill"
)

// The -db flag, as every subcommand takes it.
const (
	dbDefault = "seckill.db"
	dbUsage   = "database: a SQLite file path (created when missing) or a postgres:// URL"
)

func seed(ctx context.Context, args []string) error {
	fs := newFlags("seed", "Create voucher -voucher with -stock in stock, deleting its orders (fresh data).")
	dsn := fs.String("db", dbDefault, dbUsage)
	voucher := fs.Int64("voucher", 1, "voucher id (positive)")
	stock := fs.Int64("stock", 200, "initial stock (>= 0)")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := seckill.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Seed(ctx, *voucher, *stock); err != nil {
		return err
	}
	fmt.Printf("voucher=%d stock=%d\n", *voucher, *stock)
	return nil
}

func report(ctx context.Context, args []string) error {
	fs := newFlags("report", "Print 'orders=N duplicates=N oversold=N' for -voucher: duplicates are orders beyond\none per user, oversold are orders beyond the voucher's initial stock.")
	dsn := fs.String("db", dbDefault, dbUsage)
	voucher := fs.Int64("voucher", 1, "voucher id")
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := seckill.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := st.Report(ctx, *voucher)
	if errors.Is(err, seckill.ErrUnknownVoucher) {
		return fmt.Errorf("voucher %d not found in %s", *voucher, *dsn)
	}
	if err != nil {
		return err
	}
	fmt.Println(r)
	return nil
}

func loadgen(ctx context.Context, args []string) error {
	fs := newFlags("loadgen", "Send -users users × -dup concurrent duplicate orders of -voucher, round-robin over\n-targets; print the count of each outcome and the p50/p99 latency.")
	targets := fs.String("targets", "http://127.0.0.1:8080", "comma-separated base URLs of the nodes (loopback only)")
	voucher := fs.Int64("voucher", 1, "voucher id")
	users := fs.Int("users", 300, "number of users (ids 1..users)")
	dup := fs.Int("dup", 8, "concurrent duplicate requests per user")
	conc := fs.Int("concurrency", seckill.DefaultLoadConcurrency, "users sending at once")
	timeout := fs.Duration("timeout", seckill.DefaultLoadTimeout, "bound on the whole run")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := parse(fs, args); err != nil {
		return err
	}
	ts, err := seckill.ParseTargets(*targets)
	if err != nil {
		return err
	}
	cfg := seckill.LoadConfig{Targets: ts, VoucherID: *voucher, Users: *users, Dup: *dup, Concurrency: *conc, Timeout: *timeout}
	if !*quiet {
		cfg.Progress = os.Stderr
	}
	res, err := seckill.RunLoad(ctx, cfg)
	printLoad(res)
	return err
}

func printLoad(r seckill.LoadResult) {
	rows := [][2]string{
		{"requests", fmt.Sprint(r.Requests)},
		{"200 ordered", fmt.Sprint(r.OK)},
		{"400 already purchased", fmt.Sprint(r.Already)},
		{"400 out of stock", fmt.Sprint(r.OutOfStock)},
		{"429 busy", fmt.Sprint(r.Busy)},
		{"5xx", fmt.Sprint(r.ServerErrors)},
		{"other status", fmt.Sprint(r.Other)},
		{"failed (no answer)", fmt.Sprint(r.Failed)},
		{"latency p50", r.P50.Round(100 * 1000).String()},
		{"latency p99", r.P99.Round(100 * 1000).String()},
		{"elapsed", r.Elapsed.Round(1e6).String()},
	}
	for _, row := range rows {
		fmt.Printf("%-22s %s\n", row[0], row[1])
	}
	fmt.Println(strings.TrimSpace(r.String()))
}
