package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
)

// tlsFlags are the TLS flags. TLS is off unless -tls is given or -url is
// a rediss:// URL.
type tlsFlags struct {
	enabled    bool   // -tls, or a rediss:// URL
	caFile     string // -tls-ca-file: PEM CA bundle; default the system's roots
	insecure   bool   // -tls-insecure-skip-verify, or skip_verify=true in the URL
	serverName string // -tls-server-name: default the host of each address dialled
}

// register adds the TLS flags to fs, writing into f.
func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.enabled, "tls", false, "connect over TLS (with -addr, -cluster or -sentinel: to every node and sentinel; a rediss:// -url turns it on by itself)")
	fs.StringVar(&f.caFile, "tls-ca-file", "", "verify the servers' certificates against the PEM CA bundle in `file` instead of the system's roots (with -tls or rediss://)")
	fs.BoolVar(&f.insecure, "tls-insecure-skip-verify", false, "do NOT verify the servers' certificates: for tests and self-signed certificates only, anyone on the path can read and change the traffic, password included (with -tls or rediss://)")
	fs.StringVar(&f.serverName, "tls-server-name", "", "the `name` the servers' certificates must hold (and sent as SNI); default the host of each address dialled (with -tls or rediss://)")
}

// check reports a usage error when a TLS option is given without TLS, or
// two options contradict each other. set holds the flags given.
func (f *tlsFlags) check(set map[string]bool) error {
	if !f.enabled {
		for _, name := range []string{"tls-ca-file", "tls-insecure-skip-verify", "tls-server-name"} {
			if set[name] {
				return usageErr("-%s needs TLS: add -tls, or use a rediss:// -url", name)
			}
		}
	}
	if f.caFile != "" && f.insecure {
		return usageErr("-tls-ca-file and -tls-insecure-skip-verify (or skip_verify in the URL) exclude each other: skipping the verification ignores the CA")
	}
	return nil
}

// config returns the client's TLS configuration: nil when TLS is off, else
// TLS 1.2 or later verifying the servers against -tls-ca-file's
// certificates (default: the system's roots) for -tls-server-name (default:
// the host of each address dialled, which crypto/tls fills in), or not
// verifying with -tls-insecure-skip-verify. It fails when the CA file cannot
// be read or holds no PEM certificate.
func (f *tlsFlags) config() (*tls.Config, error) {
	if !f.enabled {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         f.serverName,
		InsecureSkipVerify: f.insecure,
	}
	if f.caFile != "" {
		pool, err := loadCAs(f.caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	return c, nil
}

// loadCAs reads the PEM certificates of file into a pool.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("-tls-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-tls-ca-file %s: %w", file, errNoPEM)
	}
	return pool, nil
}

// errNoPEM is a CA file without a PEM certificate.
var errNoPEM = errors.New("no PEM certificate in it")

// tlsHint adds to err, when TLS is off and the server closed or reset the
// connection (what a TLS port does to plain RESP), that the port may want
// TLS.
func tlsHint(err error, c *config) error {
	if err == nil || c.tls.enabled || !(errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		return err
	}
	return fmt.Errorf("%w (the server closed the connection: if this port speaks TLS, add -tls or use a rediss:// -url)", err)
}
