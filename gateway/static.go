package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// maxStaticBytes bounds what mountStatic loads into memory: pages, scripts
// and styles, not media libraries.
const maxStaticBytes = 32 << 20

// staticFile is one file of the static FS, held in memory.
type staticFile struct {
	body        []byte
	contentType string
	etag        string
}

// mountStatic serves every file of fsys at its own path, and a folder's
// index.html at the folder ("/" for the top), and a page without its
// .html. The files are read once, here:
// they are embedded and small, and a request then never touches a file
// system. Each file gets its own GET route, rather than one catch-all, so an
// unknown path stays a JSON 404 and a wrong method on an API path stays a 405.
func (s *Server) mountStatic(fsys fs.FS) error {
	s.staticPaths = map[string]bool{}
	total := 0
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("gateway: static files: %w", err)
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fmt.Errorf("gateway: static file %s: %w", p, err)
		}
		if total += len(body); total > maxStaticBytes {
			return fmt.Errorf("gateway: static files exceed %d bytes", maxStaticBytes)
		}
		sum := sha256.Sum256(body)
		f := &staticFile{body: body, contentType: contentType(p), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		routes := []string{"/" + p}
		switch {
		case d.Name() == "index.html":
			dir := path.Dir(p)
			if dir == "." {
				routes = append(routes, "/")
			} else {
				routes = append(routes, "/"+dir)
			}
		case path.Ext(p) == ".html":
			// Pages have clean addresses: admin.html is /admin.
			routes = append(routes, "/"+strings.TrimSuffix(p, ".html"))
		}
		for _, r := range routes {
			if r != "/" {
				s.staticPaths[r] = true
			}
			s.app.Get(r, f.serve)
		}
		return nil
	})
}

func contentType(p string) string {
	switch ext := path.Ext(p); ext {
	case ".html", ".htm":
		return fiber.MIMETextHTMLCharsetUTF8
	case ".js", ".mjs":
		return fiber.MIMETextJavaScriptCharsetUTF8
	case ".css":
		return "text/css; charset=utf-8"
	default:
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
		return fiber.MIMEOctetStream
	}
}

// serve answers with the file, or 304 when the client has this version. The
// client revalidates each time (no-cache) so a new deploy shows at once.
func (f *staticFile) serve(c *fiber.Ctx) error {
	c.Set(fiber.HeaderETag, f.etag)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	if match := c.Get(fiber.HeaderIfNoneMatch); match != "" && strings.Contains(match, f.etag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, f.contentType)
	return c.Send(f.body)
}
