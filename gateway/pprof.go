package gateway

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/pprof"
)

// pprofPrefix is where the admin group serves Go's profiles:
// /api/v1/admin/debug/pprof/ (index), .../profile?seconds=N (CPU),
// .../heap, .../allocs, .../goroutine, .../mutex, .../block, .../trace.
const pprofPrefix = "/api/v1/admin"

// mountPprof serves net/http/pprof behind the operator token, so the buying
// path can be profiled under load on a running gateway:
//
//	curl -H "Authorization: Bearer $SECKILL_ADMIN_TOKEN" \
//	  "http://127.0.0.1:8080/api/v1/admin/debug/pprof/profile?seconds=5" > cpu.pprof
//
// A CPU profile's seconds must stay below Config.WriteTimeout (10 s by
// default), or the answer is cut. It is a middleware of the admin group, not
// a route, because its paths are Go's, not the API's: the OpenAPI document
// does not list them, and other admin paths pass through it untouched.
func (s *Server) mountPprof(admin fiber.Router) {
	admin.Use(pprof.New(pprof.Config{Prefix: pprofPrefix}))
}
