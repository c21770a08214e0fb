// Package web is the shopper and operator pages, embedded: plain HTML, CSS
// and JavaScript with no build step and no third-party assets, so the binary
// serves them offline.
//
// The gateway serves FS at the site root: "/" is index.html, "/admin" is
// admin.html, and the pages load their assets by relative name (app.js,
// admin.js, report.js, style.css; app.js starts pow.js as a Web Worker;
// remind.js registers the service worker sw.js, which must be served from
// the root to control the whole page), so the same files also open from
// disk.
package web

import (
	"embed"
	"io/fs"
)

//go:embed index.html admin.html app.js admin.js report.js pow.js remind.js sw.js style.css
var files embed.FS

// Page names inside FS.
const (
	// ShopperPage is served at "/".
	ShopperPage = "index.html"
	// AdminPage is served at "/admin".
	AdminPage = "admin.html"
)

// FS returns the embedded pages and their assets, at its root.
func FS() fs.FS {
	return files
}
