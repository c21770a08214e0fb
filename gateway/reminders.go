package gateway

// Reminders of a shopper's turn (gateway/openapi.yaml, "Reminders";
// notify/remind/README.md): the VAPID public key a page subscribes with,
// the shopper's push subscriptions and their e-mail address.

import (
	"context"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/i18n"
	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Reminders keeps where shoppers want their turn told (*remind.Store
// implements the storing; Deps.PushKey names the key).
type Reminders interface {
	SaveSubscription(ctx context.Context, userID int64, sub remind.Subscription) error
	DeleteSubscription(ctx context.Context, userID int64, endpoint string) (bool, error)
	SetEmail(ctx context.Context, userID int64, addr, lang string) error
	DeleteEmail(ctx context.Context, userID int64) (bool, error)
}

// errNoReminders answers the reminder routes of an instance without them.
var errNoReminders = fmt.Errorf("%w: reminders are not kept on this instance", apperr.ErrUnavailable)

// errNoPush answers GET /api/v1/push/key where Web Push is off.
var errNoPush = apperr.Public(apperr.ErrUnavailable, "Web Push reminders are not offered here")

// pushKey is GET /api/v1/push/key.
func (s *Server) pushKey(c *fiber.Ctx) error {
	if s.deps.PushKey == "" {
		return errNoPush
	}
	return c.JSON(api.PushKey{PublicKey: s.deps.PushKey})
}

// savePushSubscription is POST /api/v1/push/subscriptions.
func (s *Server) savePushSubscription(c *fiber.Ctx) error {
	var in api.PushSubscription
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	if s.deps.Reminders == nil || s.deps.PushKey == "" {
		return errNoPush
	}
	sub := remind.Subscription{Endpoint: in.Endpoint, P256dh: in.Keys.P256dh, Auth: in.Keys.Auth,
		Lang: string(i18n.Negotiate(c.Get(fiber.HeaderAcceptLanguage)))}
	if err := s.deps.Reminders.SaveSubscription(c.UserContext(), userIDOf(c), sub); err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(api.Subscribed{Endpoint: sub.Endpoint})
}

// deletePushSubscription is DELETE /api/v1/push/subscriptions?endpoint=.
func (s *Server) deletePushSubscription(c *fiber.Ctx) error {
	endpoint := strings.Clone(c.Query("endpoint"))
	if endpoint == "" {
		return apperr.InvalidField("endpoint", "the query needs the subscription's endpoint")
	}
	if s.deps.Reminders == nil {
		return errNoReminders
	}
	removed, err := s.deps.Reminders.DeleteSubscription(c.UserContext(), userIDOf(c), endpoint)
	if err != nil {
		return err
	}
	return c.JSON(api.Removed{Removed: removed})
}

// setReminderEmail is PUT /api/v1/reminders/email. The address is personal
// data: it goes to the store and back to its owner, and nowhere else.
func (s *Server) setReminderEmail(c *fiber.Ctx) error {
	var in api.ReminderEmailSet
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	if err := remind.ValidAddress(in.Address); err != nil {
		return err
	}
	if s.deps.Reminders == nil {
		return errNoReminders
	}
	if err := s.deps.Reminders.SetEmail(c.UserContext(), userIDOf(c), in.Address, string(i18n.Negotiate(c.Get(fiber.HeaderAcceptLanguage)))); err != nil {
		return err
	}
	return c.JSON(api.ReminderEmail{Address: in.Address})
}

// deleteReminderEmail is DELETE /api/v1/reminders/email.
func (s *Server) deleteReminderEmail(c *fiber.Ctx) error {
	if s.deps.Reminders == nil {
		return errNoReminders
	}
	removed, err := s.deps.Reminders.DeleteEmail(c.UserContext(), userIDOf(c))
	if err != nil {
		return err
	}
	return c.JSON(api.Removed{Removed: removed})
}
