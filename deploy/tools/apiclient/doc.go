// Package apiclient is a Go client of the platform's HTTP API, generated
// from gateway/openapi.yaml by oapi-codegen (the version pinned by the tools
// module's tool directive, deploy/tools/go.mod). The system tests
// (deploy/tools/systemtest) drive the real system with it, so a spec that
// cannot produce a working client fails a test, as it would fail a mobile
// team. Only the operations a test drives are generated (oapi-codegen.yaml
// lists them). Regenerate with `go generate ./apiclient` in deploy/tools; a test
// checks the checked-in code is current.
package apiclient

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../../gateway/openapi.yaml
