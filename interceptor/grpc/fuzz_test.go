package grpclock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lockgate/lockgate/core"
	"github.com/lockgate/lockgate/internal/rpclock"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb"
	"github.com/lockgate/lockgate/internal/rpcsuite/testpb/testpbgrpc"
	"github.com/lockgate/lockgate/keyfunc"
)

// refPart is one placeholder of a test-service key as the reference sees
// it: the name *keyfunc.Error must give, the value and whether the call
// carries one.
type refPart struct {
	name    string
	value   string
	present bool
}

// refValid is keyfunc's rule for a value, written from its documentation:
// valid UTF-8 without control characters (C0, DEL, C1).
func refValid(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

var refEscape = strings.NewReplacer("%", "%25", ":", "%3A")

// refKey builds prefix + the parts joined by ":" as the documentation says
// Key does, or names the part that must fail and the reasons it may give
// (a value both too long and invalid may report either).
func refKey(prefix string, parts []refPart) (key, errPart string, reasons []error) {
	k := prefix
	for i, p := range parts {
		if i > 0 {
			k += ":"
		}
		if !p.present || p.value == "" {
			return "", p.name, []error{keyfunc.ErrMissing}
		}
		if len(p.value) > keyfunc.DefaultMaxValueLen {
			reasons = append(reasons, keyfunc.ErrTooLong)
		}
		if !refValid(p.value) {
			reasons = append(reasons, keyfunc.ErrInvalidValue)
		}
		if len(reasons) > 0 {
			return "", p.name, reasons
		}
		k += refEscape.Replace(p.value)
		if len(k) > keyfunc.MaxKeyLen {
			return "", p.name, []error{keyfunc.ErrTooLong}
		}
	}
	return k, "", nil
}

// refFirst is the first value of the metadata key name as
// metadata.ValueFromIncomingContext finds it (an exact key, else one equal
// under Unicode case folding) in an MD with the single key mdKey.
func refFirst(mdKey string, vals []string, name string) (string, bool) {
	if mdKey == "" || !strings.EqualFold(mdKey, name) || len(vals) == 0 {
		return "", false
	}
	return vals[0], true
}

// reference returns the expected key of the test service's method for req
// and the metadata {mdKey: vals}, from the annotations in service.proto (internal/rpcsuite/testpb).
func reference(method string, req *testpb.OrderRequest, mdKey string, vals []string) (string, string, []error) {
	user := refPart{"user_id", req.GetUserId(), req.GetUserId() != ""}
	voucher := refPart{"voucher_id", strconv.FormatInt(req.GetVoucherId(), 10), req.GetVoucherId() != 0}
	sku := refPart{"field.item.sku", req.GetItem().GetSku(), req.GetItem() != nil && req.GetItem().GetSku() != ""}
	mdv, ok := refFirst(mdKey, vals, "x-user-id")
	md := refPart{"md.x-user-id", mdv, ok}
	switch method {
	case testpbgrpc.Orders_Order_FullMethodName, testpbgrpc.Orders_Quick_FullMethodName:
		return refKey("order:", []refPart{user, voucher})
	case testpbgrpc.Orders_Nested_FullMethodName:
		return refKey("sku:", []refPart{sku, md})
	case testpbgrpc.Orders_Relaxed_FullMethodName:
		return refKey("relaxed:", []refPart{user})
	case testpbgrpc.Orders_Watch_FullMethodName:
		return refKey("watch:", []refPart{user})
	case testpbgrpc.Orders_Upload_FullMethodName:
		return refKey("upload:", []refPart{md})
	case testpbgrpc.Orders_Chat_FullMethodName:
		return refKey("chat:", []refPart{md})
	}
	panic("no reference for " + method)
}

// FuzzKeyBuild builds the lock key of every annotated method of the test
// service (the rules New compiled from the annotations, through the same
// m.key.build and keyStatus the interceptors call) for arbitrary request
// field values and incoming metadata, and for arbitrary wire bytes decoded
// as the request. Invariants: no panic; a key is exactly the documented
// encoding of the call's values, never over keyfunc.MaxKeyLen; every
// failure is a *keyfunc.Error naming the field or metadata key at fault
// with the documented reason, and maps to InvalidArgument naming it —
// never another error or code. The seed corpus runs in every go test.
func FuzzKeyBuild(f *testing.F) {
	// Seeds: user, voucher, has item, sku, metadata key, number of values,
	// two values, wire bytes.
	wire := func(m *testpb.OrderRequest) []byte { b, _ := proto.Marshal(m); return b }
	f.Add("1", int64(1), true, "sku-1", "x-user-id", uint8(1), "u7", "", wire(&testpb.OrderRequest{UserId: "1", VoucherId: 1}))
	f.Add("a:b", int64(-7), false, "", "X-User-Id", uint8(2), "", "second", []byte{})
	f.Add("", int64(0), true, "", "x-user-id", uint8(0), "", "", []byte{0x0a, 0x00})
	f.Add("%3A", int64(9223372036854775807), true, "a%b:c", "x-uſer-id", uint8(1), "k:%", "", wire(&testpb.OrderRequest{UserId: "a:b", Item: &testpb.Item{Sku: "s"}}))
	f.Add("tab\there", int64(1), true, "\x7f", "x-user-id", uint8(1), "\u0085", "", []byte{0x0a, 0x02, 0xc3, 0x28})
	f.Add("\xff\xfe", int64(1), true, "é—✓", "x-lock-owner", uint8(2), "owner", "x", []byte{0xff, 0xff, 0xff})
	f.Add(strings.Repeat("u", 257), int64(1), true, strings.Repeat(":", 256), "x-user-id", uint8(1), strings.Repeat("%", 256), "", []byte{0x1a, 0x03, 0x0a, 0x01, 0x00})
	f.Add(strings.Repeat("é", 128), int64(-1), true, strings.Repeat("s", 256), "x-user-id", uint8(1), strings.Repeat("m", 256), "", wire(&testpb.OrderRequest{UserId: strings.Repeat("z", 300), VoucherId: -1, PauseMs: 5}))
	f.Add("1", int64(1), false, "", "", uint8(1), "u", "", []byte{0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})

	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: only keys are built
	f.Cleanup(func() { client.Close() })
	locker, err := core.New(client)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { locker.Close() })
	ic, err := New(locker)
	if err != nil {
		f.Fatal(err)
	}
	names := ic.Methods()
	slices.Sort(names)
	want := []string{
		testpbgrpc.Orders_Chat_FullMethodName, testpbgrpc.Orders_Nested_FullMethodName, testpbgrpc.Orders_Order_FullMethodName,
		testpbgrpc.Orders_Quick_FullMethodName, testpbgrpc.Orders_Relaxed_FullMethodName, testpbgrpc.Orders_Upload_FullMethodName,
		testpbgrpc.Orders_Watch_FullMethodName,
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		f.Fatalf("locked methods %v, want the annotated %v", names, want)
	}

	f.Fuzz(func(t *testing.T, user string, voucher int64, hasItem bool, sku, mdKey string, nvals uint8, v1, v2 string, raw []byte) {
		vals := []string{v1, v2}[:nvals%3]
		md := metadata.MD{}
		if mdKey != "" {
			md[mdKey] = vals
		}
		ctx := metadata.NewIncomingContext(context.Background(), md)

		check := func(what string, req *testpb.OrderRequest) {
			for _, name := range names {
				m := ic.methods[name]
				// The message the interceptor hands to the key: the unary
				// request, the server stream's first message (m.Input),
				// none for client and bidi streams.
				var msg protoreflect.Message
				if !m.ClientStream {
					msg = req.ProtoReflect()
				}
				wantKey, wantPart, reasons := reference(name, req, mdKey, vals)
				key, err := m.Key.Build(ctx, msg, incomingMD(ctx))
				if err == nil {
					if wantPart != "" {
						t.Fatalf("%s %s: key %q, want an error naming %s (%v)", what, name, key, wantPart, reasons)
					}
					if key != wantKey || len(key) > keyfunc.MaxKeyLen {
						t.Fatalf("%s %s: key %q, want %q", what, name, key, wantKey)
					}
					continue
				}
				var ke *keyfunc.Error
				if !errors.As(err, &ke) || ke.Part == "" {
					t.Fatalf("%s %s: %v (%T) is not a *keyfunc.Error naming a part", what, name, err, err)
				}
				if ke.Part != wantPart || !slices.ContainsFunc(reasons, func(r error) bool { return errors.Is(err, r) }) {
					t.Fatalf("%s %s: %v (part %q), want part %q with one of %v (reference key %q)", what, name, err, ke.Part, wantPart, reasons, wantKey)
				}
				st := status.Convert(failureStatus(rpclock.KeyFailure(m, err)))
				if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), ke.Part) {
					t.Fatalf("%s %s: status %v %q, want InvalidArgument naming %s", what, name, st.Code(), st.Message(), ke.Part)
				}
			}
		}

		req := &testpb.OrderRequest{UserId: user, VoucherId: voucher}
		if hasItem {
			req.Item = &testpb.Item{Sku: sku}
		}
		check("fields", req)
		// The same message after a trip over the wire, and arbitrary wire
		// bytes, as the server decodes them (proto3 strings are checked for
		// UTF-8 there; a message that does not decode never reaches the
		// interceptor).
		if b, err := proto.Marshal(req); err == nil {
			var again testpb.OrderRequest
			if err := proto.Unmarshal(b, &again); err != nil {
				t.Fatalf("unmarshal of a marshalled request: %v", err)
			}
			check("marshalled", &again)
		}
		var decoded testpb.OrderRequest
		if err := proto.Unmarshal(raw, &decoded); err == nil {
			check("wire", &decoded)
		}
	})
}
