package app

// The reminders of a shopper's turn (notify/remind/README.md): Web Push
// with the VAPID keys, e-mail through the SMTP server, each only when
// configured; every gateway hears the rooms' turns (waitroom.Channel) and
// one of them claims each in Redis.

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/seckill/waitroom"
)

func (s *System) buildReminder() (*remind.Reminder, error) {
	cfg := remind.Config{
		Store: remind.NewStore(s.pool),
		Redis: s.rdb,
		// A room of its own, without turns, only to ask whether a pass
		// is still unused.
		Check: waitroom.New(waitroom.Config{Redis: s.rdb, Secret: roomSecret(s.cfg.JWTSecret)}),
		Title: func(ctx context.Context, voucherID int64) (string, error) {
			v, err := s.catalog.Voucher(ctx, voucherID)
			return v.Title, err
		},
		// A missed pass is held for the voucher's grace: the reminder
		// names the hold's end (seckill/waitroom/README.md).
		Hold: func(ctx context.Context, voucherID int64) (time.Duration, time.Time, error) {
			v, err := s.catalog.Voucher(ctx, voucherID)
			return time.Duration(v.GraceSeconds) * time.Second, v.EndAt, err
		},
		PageURL: s.cfg.PublicURL, Delay: s.cfg.RemindDelay, QueueSize: s.cfg.RemindQueue,
		Workers: s.cfg.RemindWorkers, Attempts: s.cfg.RemindAttempts, Backoff: s.cfg.RemindBackoff,
		Registerer: s.registry, Log: s.log,
	}
	if cfg.PageURL == "" {
		cfg.PageURL = "http://" + s.cfg.HTTPAddr + "/"
	}
	if s.cfg.VAPIDPublicKey != "" {
		cfg.Pusher = remind.NewPusher(remind.VAPID{PublicKey: s.cfg.VAPIDPublicKey, PrivateKey: s.cfg.VAPIDPrivateKey,
			Subject: s.cfg.VAPIDSubject}, nil)
	}
	if s.cfg.SMTPURL != "" {
		m, err := remind.NewMailer(s.cfg.SMTPURL, s.cfg.MailFrom)
		if err != nil {
			return nil, fmt.Errorf("config: SECKILL_SMTP_URL or SECKILL_MAIL_FROM: %w", err)
		}
		cfg.Mailer = m
	}
	return remind.New(cfg)
}
