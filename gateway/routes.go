package gateway

// Every route of the gateway, in one place: the API of gateway/openapi.yaml,
// the operator routes, the probes and the pages.

import (
	_ "embed"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
)

//go:embed openapi.yaml
var openAPIDoc []byte

// routes registers the routes of gateway/openapi.yaml. Middleware first: observe (request id,
// deadline, recover, errors, access log), then CORS when configured.
func (s *Server) routes() error {
	app := s.app
	if s.metrics != nil {
		app.Use(s.metrics.middleware)
	}
	app.Use(s.observe)
	if s.readLimit() > s.cfg.BodyLimit {
		app.Use(s.capBodies)
	}
	if len(s.cfg.AllowedOrigins) > 0 {
		// A web app on another origin uses every method and header of
		// gateway/openapi.yaml (PATCH changes a voucher; If-None-Match and
		// traceparent are not among the headers a browser sends without
		// asking), and reads the headers that carry data: the next page's
		// Link, the server's clock, the answer's language and version.
		app.Use(cors.New(cors.Config{
			AllowOrigins: strings.Join(s.cfg.AllowedOrigins, ","),
			AllowMethods: "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS",
			AllowHeaders: "Authorization,Content-Type,Accept-Language,If-None-Match,Idempotency-Key," +
				"Seckill-Pass,Seckill-Entry-Token,X-Request-Id,traceparent,tracestate",
			ExposeHeaders: "Retry-After,X-Request-Id,RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset," +
				"Link,ETag,X-Server-Time,Content-Language,traceparent",
			MaxAge: 600,
		}))
	}

	// API answers are per user and per moment: no cache may keep them. The
	// catalog's answers say otherwise for themselves (CatalogCacheControl).
	api := app.Group("/api/v1", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Next()
	})
	api.Post("/users", s.perAddress, s.register)
	api.Post("/sessions", s.perAddress, s.login)
	// Fiber's Get also serves HEAD; getOnly does not. HEAD is served where
	// gateway/openapi.yaml declares it (the catalog, the probes, the
	// document, the pages: what a CDN or a monitor revalidates), and is 405
	// elsewhere: a HEAD of the captcha would make a captcha nobody sees.
	getOnly := func(path string, handlers ...fiber.Handler) { api.Add(fiber.MethodGet, path, handlers...) }
	getOnly("/captcha", s.perAddress, s.newCaptcha)
	getOnly("/challenges", s.perAddress, s.newChallenge)
	api.Get("/vouchers", s.perAddress, s.listVouchers)
	api.Get("/vouchers/:id", s.perAddress, s.getVoucher)
	getOnly("/vouchers/:id/draw/entries", s.perAddress, s.drawEntryList)
	buy := []fiber.Handler{s.requireShopper, s.buy}
	if s.metrics != nil {
		buy = append([]fiber.Handler{s.metrics.countRefusedBuys}, buy...)
	}
	api.Post("/vouchers/:id/orders", buy...)
	api.Post("/vouchers/:id/queue", s.requireShopper, s.perShopper, s.joinQueue)
	getOnly("/vouchers/:id/queue", s.requireShopper, s.perShopper, s.queueStatus)
	getOnly("/orders", s.requireShopper, s.perShopper, s.listOrders)
	getOnly("/orders/:id", s.requireShopper, s.perShopper, s.getOrder)
	getOnly("/ws", s.perAddress, s.openSocket)
	api.Post("/orders/:id/pay", s.requireShopper, s.perShopper, s.payOrder)
	api.Post("/orders/:id/cancel", s.requireShopper, s.perShopper, s.cancelOrder)
	api.Post("/orders/:id/payments", s.requireShopper, s.perShopper, s.startPayment)
	// Reminders of a shopper's turn while their tab is closed.
	getOnly("/push/key", s.perAddress, s.pushKey)
	api.Post("/push/subscriptions", s.requireShopper, s.perShopper, s.savePushSubscription)
	api.Delete("/push/subscriptions", s.requireShopper, s.perShopper, s.deletePushSubscription)
	api.Put("/reminders/email", s.requireShopper, s.perShopper, s.setReminderEmail)
	api.Delete("/reminders/email", s.requireShopper, s.perShopper, s.deleteReminderEmail)
	// The provider's deliveries: no shopper's token, no per-address limit
	// (its retries come from a few addresses); the signature is the check.
	api.Post("/payments/webhooks/stripe", s.stripeWebhook)

	admin := api.Group("/admin", s.requireAdmin)
	s.mountPprof(admin)
	admin.Post("/vouchers", s.change(s.createVoucher))
	admin.Add(fiber.MethodGet, "/vouchers/:id/stats", s.voucherStats)
	admin.Add(fiber.MethodGet, "/vouchers/:id/draw/entries", s.drawEntries)
	admin.Put("/vouchers/:id/state", s.change(s.setVoucherState))
	admin.Add(fiber.MethodGet, "/vouchers/:id/report", s.saleReport)
	admin.Add(fiber.MethodGet, "/vouchers/:id/orders.csv", s.ordersCSV)
	admin.Patch("/vouchers/:id", s.change(s.changeVoucher))
	admin.Add(fiber.MethodGet, "/vouchers/:id/changes", s.voucherChanges)
	admin.Post("/vouchers/:id/allowlist", s.change(s.addAllowlist))
	admin.Delete("/vouchers/:id/allowlist", s.change(s.clearAllowlist))
	admin.Add(fiber.MethodGet, "/breaker", s.breakerStatus)
	admin.Put("/breaker", s.change(s.switchBreaker))
	admin.Add(fiber.MethodGet, "/actions", s.operatorActions)
	admin.Post("/orders/:id/refund", s.change(s.refundOrder))

	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)
	app.Get("/openapi.yaml", s.openAPI)
	// No /metrics here: the shoppers' port would give anyone the business
	// figures, and the work of rendering them, unthrottled. The process
	// serves them on its ops listener (OpsHandler).
	if err := s.mountStatic(s.deps.Static); err != nil {
		return err
	}
	if s.metrics != nil {
		s.metrics.learnRoutes(app.GetRoutes(true))
	}
	return nil
}
func (s *Server) openAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "application/yaml")
	return c.Send(openAPIDoc)
}
