// Package apiclient is a Go client of the platform's HTTP API, generated
// from gateway/openapi.yaml by oapi-codegen (the version pinned by go.mod's
// tool directive). Only tests import it (deploy/depcheck keeps it so): the
// end-to-end contract tests of cmd/seckill drive the real system with it, so
// a spec that cannot produce a working client fails a test, as it would fail
// a mobile team. Regenerate with `go generate ./gateway/apiclient`; a test
// checks the checked-in code is current.
package apiclient

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../openapi.yaml
