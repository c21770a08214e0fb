package gateway

// The operator's routes (gateway/openapi.yaml, admin), all behind an
// operator's token (operators.go): creating a voucher and pausing it;
// steering a running sale (stock added, the waiting room's rate, a later
// end) and the record of who did; a voucher's stats, its sale report and
// the exports of its orders and of its draw's entries; and the fleet's
// switch of the circuit breaker. Every change is an operatorChange
// (adminonce.go): in the trail, and idempotent by its Idempotency-Key.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// createVoucher is POST /api/v1/admin/vouchers, an operator's change
// (adminonce.go): the voucher and its entry in the trail are stored
// together.
func (s *Server) createVoucher(c *fiber.Ctx, act *seckill.Action) error {
	var in api.NewVoucher
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	v, err := newVoucherIn(in)
	if err != nil {
		return err
	}
	if v.WaitingRoom.IsDraw() && v.WaitingRoom.DrawHold && s.deps.Holds == nil {
		return apperr.InvalidField("/waiting_room/draw_hold", "waiting_room.draw_hold needs a payment provider that holds money (SECKILL_PAYMENT_PROVIDER=stripe)")
	}
	// The record names the target: the new voucher's id.
	describe(act, seckill.ActionCreateVoucher, "", c.Body())
	created, err := s.deps.Catalog.Create(c.UserContext(), v, act)
	if err != nil {
		return err
	}
	if created.WaitingRoom.IsDraw() && s.deps.Draws != nil {
		s.commitDraw(c.UserContext(), &created)
	}
	return c.Status(fiber.StatusCreated).JSON(voucherJSON(created))
}

// commitDraw commits a new draw voucher to its beacon round and shows the
// commitment in the answer. The voucher is made already: should the beacon
// not answer, the drawer commits it later (before entries open), and the
// answer says null until then.
func (s *Server) commitDraw(ctx context.Context, v *seckill.Voucher) {
	if _, err := s.deps.Draws.CommitBeacon(ctx, *v); err != nil {
		s.log.WarnContext(ctx, "draw voucher made, its beacon round not committed yet: the drawer commits it",
			"voucher_id", v.ID, "err", err)
		return
	}
	if f, err := s.deps.Draws.Face(ctx, v.ID); err == nil {
		v.Draw = &f
	}
}

// setVoucherState pauses one voucher's sale or ends the pause; every
// instance obeys within a second (seckill/RULES.md, "Pausing one voucher").
func (s *Server) setVoucherState(c *fiber.Ctx, act *seckill.Action) error {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
	if err != nil {
		return err
	}
	var in api.VoucherState
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	st := seckill.State(in.State)
	kind := seckill.ActionResumeVoucher
	switch st {
	case seckill.StatePaused:
		kind = seckill.ActionPauseVoucher
	case seckill.StateOnSale:
	default:
		return apperr.InvalidField("/state", `state must be "paused" or "on_sale"`)
	}
	describe(act, kind, voucherTarget(id), c.Body())
	v, err := s.deps.Catalog.SetState(c.UserContext(), id, st, act)
	if err != nil {
		return err
	}
	return c.JSON(voucherJSON(v))
}

// changeVoucher steers a running sale; every instance obeys within a second
// (the catalog's announcement, as for a pause). Stock added to a voucher
// with a waiting room goes to its line: the admission step's bound is the
// stock left, and a room that closed because every unit was paid for opens
// again, inside the change's transaction, so that nothing is left to do
// once it has committed (an error after the commit would have the operator
// send again a change that was made). Each change is logged with who made
// it, and recorded with the voucher (voucherChanges lists them) and in the
// trail.
func (s *Server) changeVoucher(c *fiber.Ctx, act *seckill.Action) error {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
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
	ch.By = act.Operator
	describe(act, seckill.ActionChangeVoucher, voucherTarget(id), c.Body())
	ctx := c.UserContext()
	var reopen func(ctx context.Context, after seckill.Voucher) error
	if ch.AddStock > 0 && s.deps.Room != nil {
		reopen = func(ctx context.Context, after seckill.Voucher) error {
			if l, ok := waitroom.LineOf(after); ok {
				return s.deps.Room.Reopen(ctx, l)
			}
			return nil
		}
	}
	v, err := s.deps.Catalog.Change(ctx, id, ch, act, reopen)
	if err != nil {
		return err
	}
	attrs := []slog.Attr{slog.Int64("voucher_id", id), slog.String("operator", act.Operator),
		slog.String("addr", s.clientAddr(c).String()), slog.String("request_id", act.RequestID),
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

// voucherTarget names voucher id in the trail, as the record names the
// vouchers it creates.
func voucherTarget(id int64) string { return "voucher:" + idString(id) }

// voucherChanges is GET /api/v1/admin/vouchers/{id}/changes: every change
// operators made to the voucher's running sale, oldest first, with who made
// it, as the record keeps them (an empty list for an unknown voucher).
func (s *Server) voucherChanges(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
	if err != nil {
		return err
	}
	recs, err := s.deps.Catalog.Changes(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(changesOut(recs))
}

func (s *Server) voucherStats(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
	if err != nil {
		return err
	}
	st, err := s.deps.Stats.Stats(c.UserContext(), id)
	if err != nil {
		return err
	}
	queue, err := s.queueStats(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(statsOut(id, st, queue))
}

// queueStats is the queue figures of a voucher's stats, nil without a room.
func (s *Server) queueStats(ctx context.Context, id int64) (*api.QueueStats, error) {
	v, err := s.deps.Catalog.Voucher(ctx, id)
	if err != nil || v.WaitingRoom == nil || s.deps.Room == nil {
		return nil, nil //nolint:nilerr // the stats answer without the queue figures
	}
	st, err := s.deps.Room.Stats(ctx, id)
	if err != nil {
		return nil, err
	}
	return queueStatsOut(st), nil
}

// saleReport is GET /api/v1/admin/vouchers/{id}/report.
func (s *Server) saleReport(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
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
	id, err := parseID(c.Params("id"), "id", "the voucher id")
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

// drawEntries is GET /api/v1/admin/vouchers/{id}/draw/entries: the CSV of
// every entry, streamed.
func (s *Server) drawEntries(c *fiber.Ctx) error {
	line, err := s.drawLine(c)
	if err != nil {
		return err
	}
	face, err := s.deps.Draws.Face(c.UserContext(), line.VoucherID)
	if err != nil {
		return err
	}
	if _, drawn := draw.RandomnessFrom(face); !drawn {
		return draw.ErrNotDrawn
	}
	draws := s.deps.Draws
	s.streamCSV(c, "draw-"+idString(line.VoucherID)+".csv", "draw export", line.VoucherID,
		func(ctx context.Context, w io.Writer) error { return draws.Export(ctx, line, w) })
	return nil
}

// drawLine is the draw of the route's voucher for the operator's export:
// 404 for no such voucher, 409 conflict for a voucher that exists but is not
// sold by draw (its mode, not the address, is what is wrong), 503 without
// the draws.
func (s *Server) drawLine(c *fiber.Ctx) (waitroom.Line, error) {
	_, line, ok, err := s.routeLine(c)
	if err != nil {
		return line, err
	}
	if !ok || !line.Draw {
		return line, apperr.Public(apperr.ErrConflict,
			"this voucher is not sold by draw, so it has no entries: only a voucher whose waiting room's mode is draw has them")
	}
	if s.deps.Draws == nil {
		return line, apperr.Public(apperr.ErrUnavailable, "the draws are not available on this server")
	}
	return line, nil
}

// exportTimeout bounds one orders export: a million rows stream in well
// under a minute; an operator's client that stops reading is let go.
const exportTimeout = 10 * time.Minute

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

// breakerStatus reports the ops switch and this instance's breaker.
func (s *Server) breakerStatus(c *fiber.Ctx) error {
	if s.deps.Breaker == nil {
		return fmt.Errorf("%w: the breaker is not configured", apperr.ErrUnavailable)
	}
	mode, state := s.deps.Breaker.Status()
	out := api.Breaker{Mode: mode, State: state}
	if p, ok := s.deps.Breaker.(BreakerPaths); ok {
		out.Paths = p.Paths()
	}
	return c.JSON(out)
}

// switchBreaker sets the mode for the whole fleet; every instance obeys
// within a second. The switch is Redis's, so its entry in the trail is
// written after it: a switch that failed is never recorded as made, and
// one whose entry could not be written is answered 503, so the operator
// sends it again (setting a mode twice is setting it once).
func (s *Server) switchBreaker(c *fiber.Ctx, act *seckill.Action) error {
	if s.deps.Breaker == nil {
		return fmt.Errorf("%w: the breaker is not configured", apperr.ErrUnavailable)
	}
	var in api.BreakerMode
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	if err := s.deps.Breaker.Switch(c.UserContext(), in.Mode); err != nil {
		return err
	}
	describe(act, seckill.ActionSwitchBreaker, "breaker", c.Body())
	if s.deps.Operators != nil {
		if _, err := s.deps.Operators.RecordAction(c.UserContext(), *act); err != nil {
			return fmt.Errorf("the breaker is %s, but its entry in the operators' trail was not written; send the switch again: %w", in.Mode, err)
		}
	}
	s.log.LogAttrs(c.UserContext(), slog.LevelInfo, "breaker switched by an operator", slog.String("mode", in.Mode),
		slog.String("operator", act.Operator), slog.String("request_id", act.RequestID))
	return s.breakerStatus(c)
}
