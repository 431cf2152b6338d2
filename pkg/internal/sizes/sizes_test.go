package sizes

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	// maxFuncLines is the most lines a function may have, from the line
	// with `func` to the one with its closing brace (its doc comment aside).
	maxFuncLines = 80
	// maxFileLines is the most lines a file may have.
	maxFileLines = 500
)

// allowed names each function ("file:Func" or "file:Type.Method") or file
// ("file") that may be over its limit, and why. An entry no longer over
// its limit fails the test too, so the list never outlives its reasons.
var allowed = map[string]string{}

// root is the repository, two directories up from this package.
const root = "../../.."

// skipped says whether a file is outside the rule: tests and generated code.
func skipped(rel string) bool {
	base := filepath.Base(rel)
	return strings.HasSuffix(base, "_test.go") ||
		strings.HasPrefix(base, "zz_generated") ||
		strings.HasPrefix(rel, "pkg/generated/")
}

// oversized is one function or file over its limit.
type oversized struct {
	key   string // as in allowed
	lines int
	limit int
}

// measure parses every Go file under pkg/ that the rule covers and returns
// what is over its limit.
func measure(t *testing.T) []oversized {
	t.Helper()
	var over []oversized
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !strings.HasSuffix(rel, ".go") || skipped(rel) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			over = append(over, oversized{key: rel, lines: n, limit: maxFileLines})
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.Body.Rbrace).Line - fset.Position(fn.Type.Func).Line + 1
			if n > maxFuncLines {
				over = append(over, oversized{key: rel + ":" + funcName(fn), lines: n, limit: maxFuncLines})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading pkg/: %v", err)
	}
	return over
}

// funcName is "Func" for a function and "Type.Method" for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr: // a generic type's receiver: T[K]
			typ = x.X
			continue
		case *ast.IndexListExpr: // T[K, V]
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fmt.Sprintf("%T.%s", typ, fn.Name.Name)
	}
}

func TestSizes(t *testing.T) {
	over := measure(t)
	sort.Slice(over, func(i, j int) bool { return over[i].key < over[j].key })
	seen := map[string]bool{}
	for _, o := range over {
		seen[o.key] = true
		reason, ok := allowed[o.key]
		switch {
		case !ok:
			t.Errorf("%s: %d lines, over the limit of %d: split it into functions (or files) named for what they decide, or add it to allowed in this test with the reason it must be this long", o.key, o.lines, o.limit)
		case strings.TrimSpace(reason) == "":
			t.Errorf("%s: allowed without a reason", o.key)
		default:
			t.Logf("%s: %d lines (limit %d), allowed: %s", o.key, o.lines, o.limit, reason)
		}
	}
	for key := range allowed {
		if !seen[key] {
			t.Errorf("allowed lists %s, which is no longer over its limit (or no longer exists): remove it", key)
		}
	}
}
