package rpclock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/lockgate/lockgate/core"
	lockgatev1 "github.com/lockgate/lockgate/proto/lockgate/v1"
)

// Rule is a Go-side lock rule for one method, the equivalent of a
// (lockgate.v1.lock) annotation. grpclock.Rule and connectlock.Rule have
// the same fields and convert to it; their docs say what each field means.
type Rule struct {
	Key      string
	Wait     time.Duration
	TTL      time.Duration
	FailOpen bool
	Options  []core.LockOption
	Limit    int
	Shared   bool
}

// Config is what Load reads rules with.
type Config struct {
	// Name prefixes every error and log ("grpclock", "connectlock").
	Name string
	// Rules are the Go rules by full method name ("/pkg.Service/Method"),
	// Order their names in the order given (errors are reported in it).
	Rules map[string]Rule
	Order []string
	// Files holds the service descriptors whose annotations are read and
	// against which Go rules are resolved; Types the Go message types of
	// server-streaming requests (dynamicpb otherwise).
	Files *protoregistry.Files
	Types *protoregistry.Types
	// LockOpts are added to every Lock before the rule's own settings.
	LockOpts []core.LockOption
}

// Method is the compiled rule of one locked method. It is immutable.
type Method struct {
	Name     string // full method name, "/pkg.Service/Method"
	Origin   string // "annotation" or "Go rule", for errors and logs
	Pattern  string // the rule's key template, for logs
	Key      *Key
	Opt      core.LockOption // LockOpts, Wait, TTL, Options, combined and checked
	FailOpen bool
	// Limit is how many calls of one key hold it at once: 0 takes the
	// key's lock, N > 0 one of N permits of the semaphore named by the key
	// (core.Locker.Semaphore).
	Limit int
	// Shared takes the key's lock shared with the other shared calls of
	// the key (core.Locker.RLock); never with a Limit.
	Shared bool

	ClientStream bool
	ServerStream bool
	// Input builds an empty request message; set for server-streaming
	// methods whose key reads the message (the interceptor receives the
	// request before the handler).
	Input protoreflect.MessageType
}

// FullMethodName returns "/pkg.Service/Method".
func FullMethodName(md protoreflect.MethodDescriptor) string {
	return "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
}

// Load reads the annotations of every service in c.Files, then applies the
// Go rules over them (a Go rule replaces its method's annotation, whole).
// Every problem is reported, joined, each naming its method, whether it is
// an annotation or a Go rule, and the field at fault.
func Load(c *Config) (map[string]*Method, error) {
	methods := map[string]*Method{}
	var errs []error
	c.Files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := 0; i < svcs.Len(); i++ {
			ms := svcs.Get(i).Methods()
			for j := 0; j < ms.Len(); j++ {
				md := ms.Get(j)
				name := FullMethodName(md)
				if _, ok := c.Rules[name]; ok {
					continue // the Go rule wins; its errors are its own
				}
				m, err := CompileAnnotation(c, name, md)
				if err != nil {
					errs = append(errs, err)
				} else if m != nil {
					methods[name] = m
				}
			}
		}
		return true
	})
	for _, name := range c.Order {
		md, err := FindMethod(c.Files, name)
		if err == nil {
			var m *Method
			m, err = Compile(c, name, "Go rule", md, c.Rules[name])
			methods[name] = m
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: Go rule: %w", c.Name, name, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return methods, nil
}

// CompileAnnotation compiles the (lockgate.v1.lock) annotation of md under
// the name name. It returns nil and nil when md has none; its error names
// the method and says it is the annotation's.
func CompileAnnotation(c *Config, name string, md protoreflect.MethodDescriptor) (*Method, error) {
	lr := annotation(md)
	if lr == nil {
		return nil, nil
	}
	r, err := annotationRule(lr)
	var m *Method
	if err == nil {
		m, err = Compile(c, name, "annotation", md, r)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: (lockgate.v1.lock) annotation: %w", c.Name, name, err)
	}
	return m, nil
}

// annotation returns the method's (lockgate.v1.lock) option, or nil.
func annotation(md protoreflect.MethodDescriptor) *lockgatev1.LockRule {
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || opts == nil || !proto.HasExtension(opts, lockgatev1.E_Lock) {
		return nil
	}
	lr, _ := proto.GetExtension(opts, lockgatev1.E_Lock).(*lockgatev1.LockRule)
	return lr
}

// annotationRule turns the annotation's strings into a Rule. An empty wait
// or ttl keeps the Locker's default; a "0s" wait is a single attempt
// (core.NoWait); a negative wait or a ttl below core.MinTTL is an error;
// limit 0 keeps the lock and a negative limit is an error, as is shared
// with a limit.
func annotationRule(lr *lockgatev1.LockRule) (Rule, error) {
	r := Rule{Key: lr.GetKey(), FailOpen: lr.GetFailOpen(), Shared: lr.GetShared()}
	if n := lr.GetLimit(); n < 0 {
		return r, fmt.Errorf("limit %d is negative (0 keeps the lock, one call of a key at a time)", n)
	}
	r.Limit = int(lr.GetLimit())
	if r.Shared && r.Limit > 0 {
		return r, fmt.Errorf("shared with limit %d: a method takes its key's lock shared or a permit of its semaphore, not both", r.Limit)
	}
	if s := lr.GetWait(); s != "" {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return r, fmt.Errorf("wait %q: not a duration such as \"2s\"", s)
		case d < 0:
			return r, fmt.Errorf("wait %q is negative (\"0s\" is a single attempt)", s)
		case d == 0:
			r.Wait = core.NoWait
		default:
			r.Wait = d
		}
	}
	if s := lr.GetTtl(); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return r, fmt.Errorf("ttl %q: not a duration such as \"30s\"", s)
		}
		if d < core.MinTTL {
			return r, fmt.Errorf("ttl %q is below the minimum %v", s, core.MinTTL)
		}
		r.TTL = d
	}
	return r, nil
}

// FindMethod resolves "/pkg.Service/Method" in files.
func FindMethod(files *protoregistry.Files, fullMethod string) (protoreflect.MethodDescriptor, error) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !strings.HasPrefix(fullMethod, "/") || !ok || svc == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("method name %q is not of the form \"/package.Service/Method\"", fullMethod)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("no registered service %s", svc)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("service %s has no method %s", svc, name)
	}
	return md, nil
}

// Compile checks r against the method md and builds its Method. Every
// field is checked, FailOpen or not: a bad rule is a setup error, never a
// reason to run without the lock.
func Compile(c *Config, name, origin string, md protoreflect.MethodDescriptor, r Rule) (*Method, error) {
	// Observations name the method's lock by its key template (the
	// annotation's or the rule's; Options may name it otherwise).
	var opts []core.LockOption
	if r.Key != "" {
		opts = append(opts, core.WithPattern(r.Key))
	}
	opts = append(opts, c.LockOpts...)
	switch {
	case r.Wait == core.NoWait:
		opts = append(opts, core.WithWait(core.NoWait))
	case r.Wait < 0:
		return nil, fmt.Errorf("Rule.Wait %v is negative (0 keeps the Locker's wait, core.NoWait makes a single attempt)", r.Wait)
	case r.Wait > 0:
		opts = append(opts, core.WithWait(r.Wait))
	}
	if r.Limit < 0 {
		return nil, fmt.Errorf("Rule.Limit %d is negative (0 keeps the lock, one call of a key at a time)", r.Limit)
	}
	if r.Shared && r.Limit > 0 {
		return nil, fmt.Errorf("Rule.Shared with Rule.Limit %d: a method takes its key's lock shared or a permit of its semaphore, not both", r.Limit)
	}
	if r.TTL != 0 {
		if r.TTL < core.MinTTL {
			return nil, fmt.Errorf("Rule.TTL %v is below the minimum %v (0 keeps the Locker's TTL)", r.TTL, core.MinTTL)
		}
		opts = append(opts, core.WithTTL(r.TTL))
	}
	for i, opt := range r.Options {
		if opt == nil {
			return nil, fmt.Errorf("Rule.Options[%d] is nil", i)
		}
		if _, err := core.Combine(opt); err != nil {
			return nil, fmt.Errorf("Rule.Options[%d]: %w", i, err)
		}
	}
	opts = append(opts, r.Options...)
	combined, err := core.Combine(opts...)
	if err != nil {
		return nil, fmt.Errorf("lock options: %w", err)
	}
	k, err := compileKey(r.Key, md)
	if err != nil {
		return nil, err
	}
	m := &Method{
		Name:         name,
		Origin:       origin,
		Pattern:      r.Key,
		Key:          k,
		Opt:          combined,
		FailOpen:     r.FailOpen,
		Limit:        r.Limit,
		Shared:       r.Shared,
		ClientStream: md.IsStreamingClient(),
		ServerStream: md.IsStreamingServer(),
	}
	if m.ServerStream && !m.ClientStream && k.UsesMessage() {
		types := c.Types
		if types == nil {
			types = protoregistry.GlobalTypes
		}
		m.Input = messageType(types, md.Input())
	}
	return m, nil
}

// messageType returns the Go type of desc when it is linked in, else a
// dynamic type built from the descriptor.
func messageType(types *protoregistry.Types, desc protoreflect.MessageDescriptor) protoreflect.MessageType {
	if mt, err := types.FindMessageByName(desc.FullName()); err == nil {
		return mt
	}
	return dynamicpb.NewMessageType(desc)
}
