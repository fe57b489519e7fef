package rpclock

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/lockgate/lockgate/core"
)

// Options is what the Options of an interceptor (grpclock.Option,
// connectlock.Option, functions of *Options through an unexported alias)
// set and NewBase reads. Each exported Option is a thin wrapper of one
// method here, which stores the value or, for a bad one, records an
// error of New prefixed with the interceptor's name.
type Options struct {
	name     string          // the interceptor's, prefix of every error
	rules    map[string]Rule // Go rules by full method name
	order    []string        // full method names of rules, in the order given
	files    *protoregistry.Files
	types    *protoregistry.Types
	lockOpts []core.LockOption
	logger   *slog.Logger
	errs     []error // bad option values, reported by New
}

// defaultOptions are the defaults of both interceptors: no Go rules, the
// global registries, no lock options, slog.Default() (chosen at New).
func defaultOptions(name string) Options {
	return Options{
		name:  name,
		rules: map[string]Rule{},
		files: protoregistry.GlobalFiles,
		types: protoregistry.GlobalTypes,
	}
}

// fail records a bad option value, an error of New: "<name>: " and the
// formatted text.
func (o *Options) fail(format string, args ...any) {
	o.errs = append(o.errs, fmt.Errorf(o.name+": "+format, args...))
}

// SetRule is WithRule: it sets the Go rule of the method name, replacing
// an earlier one (which keeps its place in the order rules are reported
// in).
func (o *Options) SetRule(name string, r Rule) {
	if _, ok := o.rules[name]; !ok {
		o.order = append(o.order, name)
	}
	o.rules[name] = r
}

// SetFiles is WithFiles: it sets the registry rules are read from and
// resolved against; nil is an error of New.
func (o *Options) SetFiles(files *protoregistry.Files) {
	if files == nil {
		o.fail("WithFiles: nil *protoregistry.Files")
		return
	}
	o.files = files
}

// AddLockOptions is WithLockOptions: it adds opts to every Lock, after
// checking each with core.Combine; a nil or invalid one is an error of New
// (and none of opts is added).
func (o *Options) AddLockOptions(opts ...core.LockOption) {
	for i, opt := range opts {
		if opt == nil {
			o.fail("WithLockOptions: option %d is nil", i)
			return
		}
		if _, err := core.Combine(opt); err != nil {
			o.fail("WithLockOptions: option %d: %w", i, err)
			return
		}
	}
	o.lockOpts = append(o.lockOpts, opts...)
}

// SetLogger is WithLogger; nil means slog.Default() at the time of New.
func (o *Options) SetLogger(l *slog.Logger) { o.logger = l }

// AddReleaseTimeout is WithReleaseTimeout: it adds
// core.WithReleaseTimeout(d) to every Lock, in its place among the lock
// options; a d that core rejects (not positive) is an error of New.
func (o *Options) AddReleaseTimeout(d time.Duration) {
	opt := core.WithReleaseTimeout(d)
	if _, err := core.Combine(opt); err != nil {
		o.fail("WithReleaseTimeout: %w", err)
		return
	}
	o.lockOpts = append(o.lockOpts, opt)
}

// Base is the framework-neutral part of an interceptor, as NewBase builds
// it.
type Base struct {
	// Config is what the rules were loaded with (connectlock compiles the
	// rules of handlers' schemas with it, at their first call).
	Config Config
	// Methods are the compiled rules of the locked methods of
	// Config.Files, by full method name.
	Methods map[string]*Method
	// Gate takes and releases their locks, on the Locker given to New.
	Gate Gate
}

// NewBase is the common part of both interceptors' New(locker, opts...),
// name being the interceptor's ("grpclock", "connectlock"), which prefixes
// every error. A nil locker is an error alone; then opts are applied over
// the defaults in order, a nil one being an error; bad option values are
// reported first, alone (the rules would be checked against them); then
// the rules are loaded and checked (Load), every bad one reported.
func NewBase[O ~func(*Options)](name string, locker *core.Locker, opts []O) (*Base, error) {
	if locker == nil {
		return nil, errors.New(name + ": nil *core.Locker")
	}
	o := defaultOptions(name)
	for i, opt := range opts {
		if opt == nil {
			o.fail("option %d given to New is nil", i)
			continue
		}
		opt(&o)
	}
	if len(o.errs) > 0 {
		return nil, errors.Join(o.errs...)
	}
	logger := o.logger
	if logger == nil {
		logger = slog.Default()
	}
	b := &Base{
		Config: Config{
			Name:     name,
			Rules:    o.rules,
			Order:    o.order,
			Files:    o.files,
			Types:    o.types,
			LockOpts: o.lockOpts,
		},
		Gate: Gate{Name: name, Locker: locker, Logger: logger},
	}
	methods, err := Load(&b.Config)
	if err != nil {
		return nil, err
	}
	b.Methods = methods
	return b, nil
}
