package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill/apperr"
)

// exportTimeout bounds one orders export: a million rows stream in well
// under a minute; an operator's client that stops reading is let go.
const exportTimeout = 10 * time.Minute

// recordAttempt counts a buy attempt for the sale report by its answer.
// Only attempts the catalog step found a voucher for count: the voucher id
// is the client's, and counting made-up ones would let anyone add rows.
func (s *Server) recordAttempt(a *buy.Attempt, err error) {
	if s.deps.Sales == nil || a == nil || a.Voucher.ID == 0 {
		return
	}
	code, limiter := "", ""
	if err != nil {
		code, limiter = internalRow.code, a.Limiter
		if row, ok := lookup(err); ok {
			code = row.code
		}
	}
	s.deps.Sales.Attempt(a.Voucher.ID, code, limiter)
}

// saleReport is GET /api/v1/admin/vouchers/{id}/report.
func (s *Server) saleReport(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	if s.deps.Reports == nil {
		return fmt.Errorf("%w: sale reports are not configured", apperr.ErrUnavailable)
	}
	rep, err := s.deps.Reports.Report(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(rep)
}

// ordersCSV is GET /api/v1/admin/vouchers/{id}/orders.csv: the voucher's
// orders, streamed as PostgreSQL sends them. The answer is 200 once the
// voucher is known; a failure halfway ends the body early (and is logged),
// which the client sees as a cut download.
func (s *Server) ordersCSV(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	if s.deps.Reports == nil {
		return fmt.Errorf("%w: sale reports are not configured", apperr.ErrUnavailable)
	}
	if _, err := s.deps.Catalog.Voucher(c.UserContext(), id); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="voucher-%d-orders.csv"`, id))
	// The body is written after the handler returns, when the request's
	// context is over: the export has a context of its own.
	ctx := context.WithoutCancel(c.UserContext())
	reports, log := s.deps.Reports, s.log
	conn, timeout := c.Context().Conn(), s.cfg.WriteTimeout
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithTimeout(ctx, exportTimeout)
		defer cancel()
		out := &progressDeadline{w: w, conn: conn, timeout: timeout}
		if err := reports.WriteOrdersCSV(ctx, id, out); err != nil {
			log.WarnContext(ctx, "orders export cut short", "voucher_id", id, "err", err)
		}
		_ = w.Flush()
	})
	return nil
}

// progressDeadline writes to w and, as it makes progress, moves conn's
// write deadline on: the server's WriteTimeout bounds one whole answer,
// which a large export outlasts, while a client that stops reading must
// still be let go within it.
type progressDeadline struct {
	w       *bufio.Writer
	conn    net.Conn
	timeout time.Duration
	moved   time.Time
}

func (p *progressDeadline) Write(b []byte) (int, error) {
	if now := time.Now(); p.timeout > 0 && now.Sub(p.moved) > p.timeout/4 {
		_ = p.conn.SetWriteDeadline(now.Add(p.timeout))
		p.moved = now
	}
	return p.w.Write(b)
}
