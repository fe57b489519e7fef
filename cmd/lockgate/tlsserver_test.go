package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lockgate/lockgate/redistest"
	"github.com/redis/go-redis/v9"
)

// tlsName is the DNS name the test server's certificate holds besides
// the IP address 127.0.0.1.
const tlsName = "redis.test"

// pki is a throwaway CA and a server certificate it signed, as PEM files.
type pki struct {
	caFile, certFile, keyFile string
}

// writePKI makes a CA and a server certificate (ECDSA P-256, valid for an
// hour, for the IP address 127.0.0.1 and the name tlsName) in a directory
// of the test's.
func writePKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "lockgate test CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{tlsName},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server.key"),
	}
	for file, block := range map[string]*pem.Block{
		p.caFile:   {Type: "CERTIFICATE", Bytes: caDER},
		p.certFile: {Type: "CERTIFICATE", Bytes: der},
		p.keyFile:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// tlsServer is a redis-server that speaks TLS on tlsAddr (clients need no
// certificate) and plain RESP on its redistest port, which the test uses
// to set it up.
type tlsServer struct {
	*redistest.Server
	tlsAddr string
	pki     pki
}

// startTLSServer starts a tlsServer with a certificate from writePKI,
// closed at the end of the test. redistest picks the plain port; the TLS
// port is a free one, and another is tried (3 tries) when the server
// cannot start, as the port may have been taken meanwhile.
func startTLSServer(t *testing.T) *tlsServer {
	t.Helper()
	p := writePKI(t)
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := redistest.NewServer(
			"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", p.certFile,
			"--tls-key-file", p.keyFile,
			"--tls-ca-cert-file", p.caFile,
			"--tls-auth-clients", "no",
		)
		if err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() { srv.Close() })
		return &tlsServer{Server: srv, tlsAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), pki: p}
	}
	t.Fatalf("a TLS redis-server did not start in 3 tries: %v", lastErr)
	return nil
}

// addACLUser creates the ACL user name with password and every
// permission, then disables Redis's default user, so that every
// connection must authenticate as name. It returns a client of the plain
// port authenticated as name, closed at the end of the test.
func (s *tlsServer) addACLUser(t *testing.T, name, password string) *redis.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin := redis.NewClient(s.Options())
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", name, "on", ">"+password, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", name, err)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatalf("ACL SETUSER default off: %v", err)
	}
	opts := s.Options()
	opts.Username, opts.Password = name, password
	c := redisClient(t, opts)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING as %s: %v", name, err)
	}
	return c
}
