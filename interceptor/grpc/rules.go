package grpclock

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

// method is the compiled rule of one locked method.
type method struct {
	name     string // full method name, "/pkg.Service/Method"
	origin   string // "annotation" or "Go rule", for errors and logs
	pattern  string // the rule's key template, for logs
	key      *key
	opt      core.LockOption // WithLockOptions, Wait, TTL, Options, combined and checked
	failOpen bool

	clientStream bool
	serverStream bool
	// input builds an empty request message; set for server-streaming
	// methods whose key reads the message.
	input protoreflect.MessageType
}

// fullMethodName returns "/pkg.Service/Method".
func fullMethodName(md protoreflect.MethodDescriptor) string {
	return "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
}

// loadRules reads the annotations of every service in o.files, then applies
// the Go rules over them. Every problem is reported, joined, each naming
// its method.
func loadRules(o *options) (map[string]*method, error) {
	methods := map[string]*method{}
	var errs []error
	o.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := 0; i < svcs.Len(); i++ {
			ms := svcs.Get(i).Methods()
			for j := 0; j < ms.Len(); j++ {
				md := ms.Get(j)
				lr := annotation(md)
				if lr == nil {
					continue
				}
				name := fullMethodName(md)
				if _, ok := o.rules[name]; ok {
					continue // the Go rule wins; its errors are its own
				}
				r, err := annotationRule(lr)
				if err == nil {
					var m *method
					m, err = compile(name, "annotation", md, r, o)
					methods[name] = m
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("grpclock: %s: (lockgate.v1.lock) annotation: %w", name, err))
				}
			}
		}
		return true
	})
	for _, name := range o.order {
		md, err := findMethod(o.files, name)
		if err == nil {
			var m *method
			m, err = compile(name, "Go rule", md, o.rules[name], o)
			methods[name] = m
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("grpclock: %s: Go rule: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return methods, nil
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
// (core.NoWait); a negative wait or a ttl below core.MinTTL is an error.
func annotationRule(lr *lockgatev1.LockRule) (Rule, error) {
	r := Rule{Key: lr.GetKey(), FailOpen: lr.GetFailOpen()}
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

// findMethod resolves "/pkg.Service/Method" in files.
func findMethod(files *protoregistry.Files, fullMethod string) (protoreflect.MethodDescriptor, error) {
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

// compile checks r against the method md and builds its method. Every
// field is checked, FailOpen or not: a bad rule is a setup error, never a
// reason to run without the lock.
func compile(name, origin string, md protoreflect.MethodDescriptor, r Rule, o *options) (*method, error) {
	// Observations name the method's lock by its key template (the
	// annotation's or the rule's; Options may name it otherwise).
	var opts []core.LockOption
	if r.Key != "" {
		opts = append(opts, core.WithPattern(r.Key))
	}
	opts = append(opts, o.lockOpts...)
	switch {
	case r.Wait == core.NoWait:
		opts = append(opts, core.WithWait(core.NoWait))
	case r.Wait < 0:
		return nil, fmt.Errorf("Rule.Wait %v is negative (0 keeps the Locker's wait, core.NoWait makes a single attempt)", r.Wait)
	case r.Wait > 0:
		opts = append(opts, core.WithWait(r.Wait))
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
	m := &method{
		name:         name,
		origin:       origin,
		pattern:      r.Key,
		key:          k,
		opt:          combined,
		failOpen:     r.FailOpen,
		clientStream: md.IsStreamingClient(),
		serverStream: md.IsStreamingServer(),
	}
	if m.serverStream && !m.clientStream && k.usesMessage() {
		m.input = messageType(o.types, md.Input())
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
