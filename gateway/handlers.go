package gateway

import (
	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/api"
)

// --- vouchers (the catalog routes are in catalog.go)

func (s *Server) createVoucher(c *fiber.Ctx) error {
	var in api.NewVoucher
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	v, err := newVoucherIn(in)
	if err != nil {
		return err
	}
	created, err := s.deps.Catalog.Create(c.UserContext(), v)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(voucherJSON(created))
}

func (s *Server) voucherStats(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the voucher id")
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
