package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeMaxLines is what a newcomer reads in one sitting; the details live
// in the documents beside the code, which the README links.
const readmeMaxLines = 200

// TestREADMEIsShortAndLinksEveryDocument keeps the README an entry point:
// short, and linking every Markdown document of the repository, so none is
// orphaned; and every relative link of every document points at a file
// that exists.
func TestREADMEIsShortAndLinksEveryDocument(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(readme), "\n")
	require.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines: move details into the document beside the code they describe", lines)

	var docs []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".run" || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
		return nil
	}))
	require.NotEmpty(t, docs)

	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, doc := range docs {
		if doc != "README.md" {
			require.Contains(t, string(readme), "("+doc+")", "README.md does not link %s", doc)
		}
		text, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			_, err := os.Stat(filepath.Join(root, filepath.Dir(doc), target))
			require.NoError(t, err, "%s links %s, which does not exist", doc, target)
		}
	}
}

// TestREADMEPurchasePathIsThePipeline keeps the README's purchase path
// numbered as the code numbers the buy, so that a reader goes from the
// README's step N to the code: the numbered list of "The purchase path" has
// the numbers and names of the list on buy.Pipeline's doc comment (each item
// "N. name: what it does"), and each step is marked "// N. name" once in
// gateway/buy/pipeline.go, where it runs.
func TestREADMEPurchasePathIsThePipeline(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## The purchase path\n")
	require.True(t, ok, "README.md has no section \"The purchase path\"")
	section, _, _ = strings.Cut(section, "\n## ")
	item := regexp.MustCompile(`(?m)^(\d+)\. ([^:\n]+):`)
	var inREADME []string
	for _, m := range item.FindAllStringSubmatch(section, -1) {
		inREADME = append(inREADME, m[1]+". "+m[2])
	}

	path := filepath.Join(root, "gateway", "buy", "pipeline.go")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	require.NoError(t, err)
	var doc *ast.CommentGroup
	var bodies []*ast.BlockStmt
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Pipeline" {
					doc = d.Doc
				}
			}
		case *ast.FuncDecl:
			if d.Body != nil {
				bodies = append(bodies, d.Body)
			}
		}
	}
	require.NotNil(t, doc, "gateway/buy/pipeline.go: Pipeline has no doc comment")
	var inDoc []string
	for i, m := range regexp.MustCompile(`(?m)^\s*(\d+)\. ([^:\n]+):`).FindAllStringSubmatch(doc.Text(), -1) {
		require.Equal(t, strconv.Itoa(i+1), m[1], "Pipeline's doc comment numbers its steps 1, 2, 3...")
		inDoc = append(inDoc, m[1]+". "+m[2])
	}
	require.NotEmpty(t, inDoc, "Pipeline's doc comment lists no step as \"N. name: ...\"")
	require.Equal(t, inDoc, inREADME, "README.md's purchase path must list buy.Pipeline's steps, numbered and named as its doc comment")

	marker := regexp.MustCompile(`^// (\d+)\. (.+)$`)
	marked := map[int]string{}
	for _, g := range f.Comments {
		inBody := false
		for _, b := range bodies {
			inBody = inBody || (b.Pos() <= g.Pos() && g.End() <= b.End())
		}
		if !inBody {
			continue
		}
		for _, c := range g.List {
			m := marker.FindStringSubmatch(c.Text)
			if m == nil {
				continue
			}
			n, _ := strconv.Atoi(m[1])
			_, twice := marked[n]
			require.False(t, twice, "%s: step %d is marked twice", fset.Position(c.Pos()), n)
			marked[n] = m[1] + ". " + m[2]
		}
	}
	var inCode []string
	for n := 1; n <= len(marked); n++ {
		inCode = append(inCode, marked[n])
	}
	require.Equal(t, inDoc, inCode, "%s must mark every step of Pipeline's doc comment once, as \"// N. name\"", path)
}
