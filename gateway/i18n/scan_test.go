package i18n_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/i18n"
)

// sentence is one English sentence the product may show a caller, where
// the scan found it.
type sentence struct {
	text  string
	where string
}

// shownArg gives, for a call that shows a sentence, which argument holds
// it: apperr's constructors, Fields.Addf, and the helpers of a package
// that pass a parameter of theirs to one of those (helpers, by name).
func shownArg(call *ast.CallExpr, helpers map[string]int) (int, bool) {
	switch fun := call.Fun.(type) {
	case *ast.SelectorExpr:
		pkg, _ := fun.X.(*ast.Ident)
		switch {
		case pkg != nil && pkg.Name == "apperr" && (fun.Sel.Name == "Public" || fun.Sel.Name == "Publicf" || fun.Sel.Name == "InvalidField"):
			return 1, true
		case pkg != nil && pkg.Name == "apperr" && fun.Sel.Name == "Invalidf":
			return 0, true
		case fun.Sel.Name == "Addf":
			return 1, true
		}
	case *ast.Ident:
		i, ok := helpers[fun.Name]
		return i, ok
	}
	return 0, false
}

// stringOf folds a constant string: literals, their concatenation, and
// constants of the same file.
func stringOf(e ast.Expr, consts map[string]ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		a, okA := stringOf(e.X, consts)
		b, okB := stringOf(e.Y, consts)
		return a + b, okA && okB && e.Op == token.ADD
	case *ast.ParenExpr:
		return stringOf(e.X, consts)
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return stringOf(v, consts)
		}
	}
	return "", false
}

// scan finds every sentence the product module may show a caller: each
// argument of the calls shownArg knows, each Message of a PublicError
// literal, each message of an errorRow (the gateway's error table). A
// sentence it cannot read as a constant is reported as such: it could not
// be translated.
func scan(t *testing.T, root string) (found []sentence, unreadable []string) {
	t.Helper()
	helpers := map[string]int{}
	for {
		var changed bool
		found, unreadable, changed = scanOnce(t, root, helpers)
		if !changed {
			return found, unreadable
		}
	}
}

// scanOnce is one pass of scan; changed says it found helpers it did not
// know, so their callers need another pass.
func scanOnce(t *testing.T, root string, helpers map[string]int) (found []sentence, unreadable []string, changed bool) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if rel == "deploy" || strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		consts := map[string]ast.Expr{}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							consts[n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
		var params map[string]int // the enclosing function's, by name
		var fname string
		add := func(e ast.Expr) {
			where := fset.Position(e.Pos()).String()
			if id, ok := e.(*ast.Ident); ok {
				if i, ok := params[id.Name]; ok {
					// A helper passing on what its callers give it:
					// its callers' arguments are the sentences.
					if _, known := helpers[fname]; !known {
						helpers[fname] = i
						changed = true
					}
					return
				}
			}
			if s, ok := stringOf(e, consts); ok {
				found = append(found, sentence{s, where})
				return
			}
			unreadable = append(unreadable, where)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				fname, params = n.Name.Name, map[string]int{}
				i := 0
				for _, field := range n.Type.Params.List {
					for _, name := range field.Names {
						params[name.Name] = i
						i++
					}
				}
			case *ast.CallExpr:
				if i, ok := shownArg(n, helpers); ok && i < len(n.Args) {
					add(n.Args[i])
				}
			case *ast.CompositeLit:
				switch typ := n.Type.(type) {
				case *ast.SelectorExpr:
					if typ.Sel.Name == "PublicError" {
						for _, el := range n.Elts {
							if kv, ok := el.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "Message" {
								add(kv.Value)
							}
						}
					}
				case *ast.Ident:
					if typ.Name == "errorRow" && len(n.Elts) == 4 {
						add(n.Elts[3])
					}
				}
				// Rows of the error table are composite literals whose
				// type the array gives.
				if arr, ok := n.Type.(*ast.ArrayType); ok {
					if id, ok := arr.Elt.(*ast.Ident); ok && id.Name == "errorRow" {
						for _, el := range n.Elts {
							if row, ok := el.(*ast.CompositeLit); ok && len(row.Elts) == 4 {
								add(row.Elts[3])
							}
						}
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return found, unreadable, changed
}

// TestEverySentenceHasChinese: every sentence the product may show a
// caller, found by reading its source, has a Simplified Chinese
// translation, with the same verbs, so no refusal falls back to English
// for a Chinese reader, and none is built where its words cannot be
// found.
func TestEverySentenceHasChinese(t *testing.T) {
	found, unreadable := scan(t, filepath.Join("..", ".."))
	require.Greater(t, len(found), 150, "the scan finds the sentences (an empty scan proves nothing)")
	require.Empty(t, unreadable, "sentences not made of constants: use apperr.Publicf with a constant format")
	var missing []string
	for _, s := range found {
		if !i18n.Translated(s.text) {
			missing = append(missing, s.where+": "+strconv.Quote(s.text))
		}
	}
	require.Empty(t, missing, "sentences without a Chinese translation (gateway/i18n)")
}
