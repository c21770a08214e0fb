// Package depcheck keeps the product's import graph pointing down. The
// product's folders are layered (see Layers), and its test, run by `make
// lint`, fails when a package imports one of a higher layer, a package below
// the HTTP face links the web framework, the face declares a JSON shape of
// its own, anything but a test imports a test helper, or the production
// build of cmd/seckill (deploy/Dockerfile's) links dev mode's private
// services or the in-process broker.
//
// It lives in the tools module (deploy/tools), beside the other tools, and
// reads the product module (the repository's top folder) with `go list`.
package depcheck

// Layers are the product's folders, lowest first. A package belongs to the
// longest folder of the list its path starts with, and may import the
// packages of its own layer and of lower ones, never a higher one's. So the
// domains (seckill, then orders, which records seckill's reservations) know
// nothing of their faces (notify, gateway); the buy's pipeline knows nothing
// of the HTTP face that calls it nor of the gates that implement its steps;
// and only the binary starts dev mode's private services (deploy/devstack).
// Tests may import any layer: they start the services of deploy/devstack.
var Layers = [][]string{
	{"lua", "migrations", "web"}, // embedded files: scripts, schema, pages
	{"seckill"},                  // the buying domain, the API's objects (seckill/api) and errors (seckill/apperr)
	{"orders"},                   // the order domain: persistence, workers, sweeper, sale report
	{"notify"},                   // status events and the per-user push hub
	{"gateway/buy"},              // the buy's pipeline: its steps, in order, without HTTP
	{"gateway"},                  // the HTTP face: routes, gates (gateway/edge), accounts (gateway/auth)
	{"deploy"},                   // the private services of dev mode (deploy/devstack)
	{"cmd"},                      // the binary: configuration and wiring (cmd/seckill/app)
}

// Face is the lowest folder of Layers that speaks HTTP: no package below it
// links the web framework.
const Face = "gateway"
