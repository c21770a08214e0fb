package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/apperr"
)

// exportTimeout bounds one orders export: a million rows stream in well
// under a minute; an operator's client that stops reading is let go.
const exportTimeout = 10 * time.Minute

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
	reports := s.deps.Reports
	s.streamCSV(c, fmt.Sprintf("voucher-%d-orders.csv", id), "orders export", id,
		func(ctx context.Context, w io.Writer) error { return reports.WriteOrdersCSV(ctx, id, w) })
	return nil
}

// streamCSV answers c with the CSV that write produces, as an attachment
// named filename, streamed: the body is written after the handler returns,
// when the request's context is over, so the export has a context of its
// own (bounded by exportTimeout), and the write deadline moves on while it
// makes progress. A failure halfway ends the body early and is logged as
// what (the status is sent by then).
func (s *Server) streamCSV(c *fiber.Ctx, filename, what string, voucherID int64, write func(ctx context.Context, w io.Writer) error) {
	c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+filename+`"`)
	ctx := context.WithoutCancel(c.UserContext())
	log := s.log
	conn, timeout := c.Context().Conn(), s.cfg.WriteTimeout
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithTimeout(ctx, exportTimeout)
		defer cancel()
		if err := write(ctx, &progressDeadline{w: w, conn: conn, timeout: timeout}); err != nil {
			log.WarnContext(ctx, what+" cut short", "voucher_id", voucherID, "err", err)
		}
		_ = w.Flush()
	})
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
