package core_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// quickstartMarker precedes the README's quick-start fence.
const quickstartMarker = "<!-- quickstart: core/example_test.go Example -->"

// TestReadmeQuickstart checks that the README's quick start is the runnable
// Example of example_test.go: the same imports, Example's body as main's,
// and every function of the file Example calls, line for line (trimmed,
// blank lines and comments skipped). Edit example_test.go and copy it to
// the README, or the other way round.
func TestReadmeQuickstart(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := quickstartBlock(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want := exampleProgram(t, string(src))

	g, w := codeLines(got), codeLines(want)
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("README quick start differs from core/example_test.go's Example at code line %d:\nREADME:  %q\nExample: %q\n(copy the Example into the README block after %s)",
				i+1, gl, wl, quickstartMarker)
		}
	}
}

// quickstartBlock returns the Go fence right after the marker.
func quickstartBlock(readme string) (string, error) {
	i := strings.Index(readme, quickstartMarker)
	if i < 0 {
		return "", fmt.Errorf("README.md has no %s", quickstartMarker)
	}
	rest := strings.TrimLeft(readme[i+len(quickstartMarker):], " \t\r\n")
	if !strings.HasPrefix(rest, "```go\n") {
		return "", fmt.Errorf("the quick-start marker is not followed by a ```go fence")
	}
	rest = rest[len("```go\n"):]
	end := strings.Index(rest, "\n```")
	if end < 0 {
		return "", fmt.Errorf("the quick-start fence is not closed")
	}
	return rest[:end], nil
}

// exampleProgram is the Example as the README shows it: package main, the
// file's imports, func main with Example's body, then the file's functions
// that Example calls, in the order of the file.
func exampleProgram(t *testing.T, src string) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	text := func(n ast.Node) string {
		return src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset]
	}
	funcs := map[string]*ast.FuncDecl{}
	var example *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
			funcs[fd.Name.Name] = fd
			if fd.Name.Name == "Example" {
				example = fd
			}
		}
	}
	if example == nil {
		t.Fatal("example_test.go has no func Example")
	}
	var b strings.Builder
	b.WriteString("package main\n")
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
			b.WriteString(text(gd) + "\n")
		}
	}
	body := text(example.Body) // "{ ... }"
	b.WriteString("func main() " + body + "\n")
	called := map[string]bool{}
	ast.Inspect(example.Body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if id, ok := c.Fun.(*ast.Ident); ok && funcs[id.Name] != nil {
				called[id.Name] = true
			}
		}
		return true
	})
	if len(called) == 0 {
		t.Fatal("Example calls no function of example_test.go: update this test")
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && called[fd.Name.Name] {
			b.WriteString(text(fd) + "\n")
		}
	}
	return b.String()
}

// codeLines normalises Go source for comparison: each line trimmed, blank
// lines and whole-line comments dropped, trailing // comments cut (outside
// string literals; the quick start has no "//" in a string).
func codeLines(src string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if i := strings.Index(l, "//"); i >= 0 && strings.Count(l[:i], `"`)%2 == 0 {
			l = strings.TrimSpace(l[:i])
		}
		if l == "" {
			continue
		}
		out = append(out, l)
	}
	return out
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestReadmeLinks checks that every relative link of README.md,
// example/README.md and docs/*.md names a file or directory that exists,
// relative to the document (an #anchor is not checked).
func TestReadmeLinks(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{"../README.md", "../example/README.md"}, docs...)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") || strings.HasPrefix(link, "#") {
				continue
			}
			if i := strings.IndexByte(link, '#'); i >= 0 {
				link = link[:i]
			}
			target := filepath.Join(filepath.Dir(doc), filepath.FromSlash(link))
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %q: %v", strings.TrimPrefix(doc, "../"), m[1], err)
			}
		}
	}
}
