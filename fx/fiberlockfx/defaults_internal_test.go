package fiberlockfx

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/lockgate/lockgate/core"
	fiberlock "github.com/lockgate/lockgate/middleware/fiber"
)

// routeOnly are the fiberlock.Config fields Defaults leaves out on purpose:
// the Locker is the graph's, the key, its concurrency limit and whether it
// is taken shared the route's.
var routeOnly = map[string]bool{"Locker": true, "Key": true, "Template": true, "Route": true, "Limit": true, "Shared": true}

// TestDefaultsMatchConfig: every fiberlock.Config field is either in
// Defaults, with the same type, or route-only; Defaults has no field
// Config lacks. A field added to Config fails here until Defaults (and
// the merge, checked below) carry it or it is declared route-only.
func TestDefaultsMatchConfig(t *testing.T) {
	ct, dt := reflect.TypeFor[fiberlock.Config](), reflect.TypeFor[Defaults]()
	for i := range ct.NumField() {
		cf := ct.Field(i)
		df, ok := dt.FieldByName(cf.Name)
		switch {
		case routeOnly[cf.Name] && ok:
			t.Errorf("Defaults.%s: the field is route-only", cf.Name)
		case routeOnly[cf.Name]:
		case !ok:
			t.Errorf("fiberlock.Config.%s is missing from Defaults (or is it route-only?)", cf.Name)
		case df.Type != cf.Type:
			t.Errorf("Defaults.%s is a %v, fiberlock.Config.%s a %v", cf.Name, df.Type, cf.Name, cf.Type)
		}
	}
	for i := range dt.NumField() {
		if _, ok := ct.FieldByName(dt.Field(i).Name); !ok {
			t.Errorf("Defaults.%s is not a fiberlock.Config field", dt.Field(i).Name)
		}
	}
}

// TestEveryDefaultMerged: with every Defaults field set, a route's zero
// Config takes each of them; a route's own non-zero field wins (FailOpen:
// either; LockOptions: the defaults', then the route's).
func TestEveryDefaultMerged(t *testing.T) {
	var called int // the mark of the last generated function called
	gen := func(typ reflect.Type, mark int) reflect.Value {
		switch typ.Kind() {
		case reflect.Func:
			return reflect.MakeFunc(typ, func([]reflect.Value) []reflect.Value {
				called = mark
				out := make([]reflect.Value, typ.NumOut())
				for i := range out {
					out[i] = reflect.Zero(typ.Out(i))
				}
				return out
			})
		case reflect.Int, reflect.Int64:
			v := reflect.New(typ).Elem()
			v.SetInt(int64(mark))
			return v
		case reflect.Bool:
			return reflect.ValueOf(true)
		case reflect.Pointer:
			return reflect.New(typ.Elem())
		case reflect.Slice:
			if typ.Elem() == reflect.TypeFor[core.LockOption]() {
				return reflect.ValueOf([]core.LockOption{core.WithoutWatchdog()})
			}
		}
		t.Fatalf("no test value for a %v: extend gen", typ)
		return reflect.Value{}
	}
	// same reports whether got is the value gen made with mark.
	same := func(got, want reflect.Value, mark int) bool {
		if got.Kind() == reflect.Func {
			if got.IsNil() {
				return false
			}
			called = 0
			args := make([]reflect.Value, got.Type().NumIn())
			for i := range args {
				args[i] = reflect.Zero(got.Type().In(i))
			}
			got.Call(args)
			return called == mark
		}
		if got.Kind() == reflect.Pointer {
			return got.Pointer() == want.Pointer()
		}
		return reflect.DeepEqual(got.Interface(), want.Interface())
	}

	var d Defaults
	dv := reflect.ValueOf(&d).Elem()
	for i := range dv.NumField() {
		dv.Field(i).Set(gen(dv.Field(i).Type(), 1))
	}
	f := &Factory{locker: &core.Locker{}, def: d}

	merged := reflect.ValueOf(f.config(fiberlock.Config{}))
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		got := merged.FieldByName(name)
		if name == "LockOptions" {
			if got.Len() != 1 {
				t.Errorf("LockOptions: %d merged, want the default's 1", got.Len())
			}
			continue
		}
		if !same(got, dv.Field(i), 1) {
			t.Errorf("%s: a route's zero value did not take the default", name)
		}
	}

	var route fiberlock.Config
	rv := reflect.ValueOf(&route).Elem()
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		rv.FieldByName(name).Set(gen(rv.FieldByName(name).Type(), 2))
	}
	merged = reflect.ValueOf(f.config(route))
	for i := range dv.NumField() {
		name := dv.Type().Field(i).Name
		got := merged.FieldByName(name)
		switch name {
		case "LockOptions":
			if got.Len() != 2 {
				t.Errorf("LockOptions: %d merged, want the default's then the route's", got.Len())
			}
		case "FailOpen":
			if !got.Bool() {
				t.Error("FailOpen lost")
			}
		default:
			if !same(got, rv.FieldByName(name), 2) {
				t.Errorf("%s: the route's own value did not win", name)
			}
		}
	}
	if merged.FieldByName("Locker").Interface() != f.locker {
		t.Error("the Factory's Locker was not filled in")
	}
}

// TestOptionsMergedByField: every Defaults field set by one Options piece
// reaches the merged Defaults, and set by two is an error naming it
// (FailOpen: on when any piece turns it on).
func TestOptionsMergedByField(t *testing.T) {
	set := func(v reflect.Value) {
		switch typ := v.Type(); typ.Kind() {
		case reflect.Func:
			v.Set(reflect.MakeFunc(typ, func([]reflect.Value) []reflect.Value {
				out := make([]reflect.Value, typ.NumOut())
				for i := range out {
					out[i] = reflect.Zero(typ.Out(i))
				}
				return out
			}))
		case reflect.Int, reflect.Int64:
			v.SetInt(1)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(typ.Elem()))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(typ, 1, 1))
		default:
			t.Fatalf("no test value for a %v: extend set", typ)
		}
	}
	dt := reflect.TypeFor[Defaults]()
	for i := range dt.NumField() {
		name := dt.Field(i).Name
		var a, b, other Defaults
		set(reflect.ValueOf(&a).Elem().Field(i))
		set(reflect.ValueOf(&b).Elem().Field(i))
		set(reflect.ValueOf(&other).Elem().Field((i + 1) % dt.NumField()))
		got, err := merge([]*Defaults{nil, &a, &other})
		if err != nil {
			t.Fatalf("%s set once: %v", name, err)
		}
		if unset(reflect.ValueOf(got).Field(i)) {
			t.Errorf("%s set by one piece did not reach the merged Defaults", name)
		}
		_, err = merge([]*Defaults{&a, &b})
		if name == "FailOpen" {
			if err != nil {
				t.Errorf("FailOpen on in two pieces: %v", err)
			}
			continue
		}
		if !errors.Is(err, core.ErrInvalid) || !strings.Contains(err.Error(), "Defaults."+name+" ") {
			t.Errorf("%s set by two pieces: %v, want core.ErrInvalid naming it", name, err)
		}
	}
}
