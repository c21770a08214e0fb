package gateway

// Steering a running sale (PATCH /api/v1/admin/vouchers/{id}): stock added,
// the waiting room's rate, a later end.

import (
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// changeVoucher steers a running sale; every instance obeys within a second
// (the catalog's announcement, as for a pause). Stock added to a voucher
// with a waiting room goes to its line: the admission step's bound is the
// stock left, and a room that closed because every unit was paid for opens
// again. Each change is logged with who made it, and recorded with the
// voucher (voucherChanges lists them).
func (s *Server) changeVoucher(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	var in api.VoucherChange
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	ch, err := voucherChange(in)
	if err != nil {
		return err
	}
	ch.By = s.operatorID()
	ctx := c.UserContext()
	v, err := s.deps.Catalog.Change(ctx, id, ch)
	if err != nil {
		return err
	}
	if l, ok := waitroom.LineOf(v); ok && ch.AddStock > 0 && s.deps.Room != nil {
		if err := s.deps.Room.Reopen(ctx, l); err != nil {
			return err
		}
	}
	attrs := []slog.Attr{slog.Int64("voucher_id", id), slog.String("operator", s.operatorID()),
		slog.String("addr", s.clientAddr(c).String()), slog.String("request_id", requestIDOf(c)),
		slog.Int64("stock_total", v.StockTotal), slog.Time("end_at", v.EndAt)}
	if ch.AddStock > 0 {
		attrs = append(attrs, slog.Int64("add_stock", ch.AddStock))
	}
	if ch.AdmitPerSecond > 0 {
		attrs = append(attrs, slog.Int64("admit_per_second", ch.AdmitPerSecond))
	}
	if !ch.EndAt.IsZero() {
		attrs = append(attrs, slog.String("new_end_at", ch.EndAt.UTC().Format(time.RFC3339)))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "voucher changed by an operator", attrs...)
	return c.JSON(voucherJSON(v))
}

// voucherChanges is GET /api/v1/admin/vouchers/{id}/changes: every change
// operators made to the voucher's running sale, oldest first, with who made
// it, as the record keeps them (an empty list for an unknown voucher).
func (s *Server) voucherChanges(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	recs, err := s.deps.Catalog.Changes(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(changesOut(recs))
}

// operatorID names the operator in logs: the first 8 bytes of the admin
// token's SHA-256, the same fingerprint the operator page shows beside the
// changes it made, so a log line and a page tell the same who without the
// token itself.
func (s *Server) operatorID() string {
	return "sha256:" + hex.EncodeToString(s.adminDigest[:8])
}
