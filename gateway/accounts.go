package gateway

// Accounts (gateway/openapi.yaml, accounts): registering and logging in.
// Both are anonymous and cost a password hash, so both are behind a limit
// by client address, and a username's failed logins behind one of their
// own.

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// allowCredentials asks the per-IP limit (Gates.Credentials) of the
// anonymous routes that cost a password hash: registration and login.
func (s *Server) allowCredentials(c *fiber.Ctx) error {
	if s.deps.Gates.Credentials == nil {
		return nil
	}
	return s.deps.Gates.Credentials.Allow(c.UserContext(), s.clientKey(c))
}

func (s *Server) register(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	var in api.Credentials
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	u, err := s.deps.Accounts.Register(c.UserContext(), in.Username, in.Password)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(userOut(u))
}

func (s *Server) login(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	var in api.Credentials
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	names := s.deps.Gates.LoginName
	charged := names != nil && in.Username != ""
	if charged {
		if err := names.Take(c.UserContext(), in.Username); err != nil {
			return err
		}
	}
	token, uid, exp, err := s.deps.Accounts.Login(c.UserContext(), in.Username, in.Password)
	if charged && !errors.Is(err, apperr.ErrUnauthenticated) {
		// Only wrong credentials spend the budget: the owner's successes
		// (and our own failures) leave it to the owner.
		names.Refund(context.WithoutCancel(c.UserContext()), in.Username)
	}
	if err != nil {
		return err
	}
	return c.JSON(api.Session{Token: token, UserID: idString(uid), ExpiresAt: exp.UTC()})
}
