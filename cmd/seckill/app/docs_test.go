package app

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
