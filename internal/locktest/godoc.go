package locktest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// NoInternalValues fails t if an exported variable or constant of the
// package in the current directory is built by a call into an internal
// package: go doc shows a value as written, so such a value shows a call
// readers cannot look up (lockhttp.NoLocker(...)) instead of the error's
// text and what it wraps.
func NoInternalValues(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(path, "/internal/") {
				continue
			}
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			internal[local] = true
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || (gd.Tok != token.VAR && gd.Tok != token.CONST) {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				exported := false
				for _, n := range vs.Names {
					exported = exported || n.IsExported()
				}
				if !exported {
					continue
				}
				for _, v := range vs.Values {
					ast.Inspect(v, func(n ast.Node) bool {
						call, ok := n.(*ast.CallExpr)
						if !ok {
							return true
						}
						if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
							if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
								t.Errorf("%s: exported %s is shown by go doc as %s.%s(...), an internal package", fset.Position(vs.Pos()), vs.Names[0].Name, id.Name, sel.Sel.Name)
							}
						}
						return true
					})
				}
			}
		}
	}
}
