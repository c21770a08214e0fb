package remind

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/mail"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Subscription is a browser's Web Push subscription, as its
// PushSubscription.toJSON() gives it.
type Subscription struct {
	Endpoint string
	// P256dh and Auth are the browser's keys, base64url: its ECDH public
	// key (65 bytes) and the authentication secret (16 bytes).
	P256dh, Auth string
	// Lang is the language of the reminders ("zh-CN" or "en").
	Lang string
}

// Contacts are the ways to reach one shopper.
type Contacts struct {
	Push []Subscription
	// Email is "" when the shopper gave none.
	Email     string
	EmailLang string
}

// Store keeps the shoppers' push subscriptions and e-mail addresses in
// PostgreSQL (migrations/019_reminders.sql): this package owns both tables.
// An address is personal data: nothing here logs it, and errors never
// carry it.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns the store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Limits of what a shopper may store.
const (
	// MaxSubscriptions is how many browsers one shopper may subscribe;
	// the oldest goes when a new one would pass it.
	MaxSubscriptions = 10
	maxEndpoint      = 1024
	maxAddress       = 254
	// advisoryClass is the first key of this package's advisory locks.
	advisoryClass = 0x72656d /* "rem" */
)

// ValidSubscription checks a subscription the way a push service would
// take it: an https endpoint, a P-256 public key and a 16-byte secret.
// Anything else is apperr.ErrInvalidInput naming the field.
func ValidSubscription(s Subscription) error {
	u, err := url.Parse(s.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || len(s.Endpoint) > maxEndpoint || !endpointShaped(s.Endpoint) {
		return apperr.InvalidField("/endpoint", "must be the push service's https URL, at most %d characters", maxEndpoint)
	}
	if k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s.P256dh, "=")); err != nil || len(k) != 65 || k[0] != 4 {
		return apperr.InvalidField("/keys/p256dh", "must be the base64url of an uncompressed P-256 public key (65 bytes)")
	}
	if k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s.Auth, "=")); err != nil || len(k) != 16 {
		return apperr.InvalidField("/keys/auth", "must be the base64url of the 16-byte authentication secret")
	}
	return nil
}

// endpointShaped says whether endpoint has the shape of openapi.yaml's
// push endpoint: https://, a host of letters, digits, dots and hyphens, an
// optional port, and a path of unreserved characters, sub-delims, ':' and '@'
// (what push services hand out; nothing percent-encoded or spaced).
func endpointShaped(endpoint string) bool {
	rest, ok := strings.CutPrefix(endpoint, "https://")
	if !ok {
		return false
	}
	host, path, _ := strings.Cut(rest, "/")
	host, port, hasPort := strings.Cut(host, ":")
	if host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "" {
		return false
	}
	if hasPort && (port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "") {
		return false
	}
	const pathChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~!$&'()*+,;=:@/-"
	return strings.Trim(path, pathChars) == ""
}

// ValidAddress checks an e-mail address: a bare addr-spec (no display
// name), at most 254 characters. The error never repeats the address.
func ValidAddress(addr string) error {
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Name != "" || a.Address != addr || len(addr) > maxAddress || !strings.Contains(addr[strings.LastIndexByte(addr, '@')+1:], ".") {
		return apperr.InvalidField("/address", "must be an e-mail address such as name@example.com, at most %d characters", maxAddress)
	}
	return nil
}

// SaveSubscription stores the user's subscription (a browser subscribing
// again replaces its keys, and an endpoint moves to its new user), keeping
// the user's newest MaxSubscriptions.
func (s *Store) SaveSubscription(ctx context.Context, userID int64, sub Subscription) error {
	if err := ValidSubscription(sub); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// One saver of a user at a time, so that two browsers subscribing
		// at once cannot both keep the row the other trims.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, ($2 % 2147483647)::int)`, advisoryClass, userID); err != nil {
			return fmt.Errorf("remind: lock a user's subscriptions: %w", unavailable(err))
		}
		if _, err := tx.Exec(ctx, `INSERT INTO push_subscriptions (endpoint, user_id, p256dh, auth, lang)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (endpoint) DO UPDATE SET user_id = $2, p256dh = $3, auth = $4, lang = $5, created_at = now()`,
			sub.Endpoint, userID, sub.P256dh, sub.Auth, sub.Lang); err != nil {
			return fmt.Errorf("remind: save a subscription: %w", unavailable(err))
		}
		if _, err := tx.Exec(ctx, `DELETE FROM push_subscriptions WHERE endpoint IN (
			SELECT endpoint FROM push_subscriptions WHERE user_id = $1 ORDER BY created_at DESC OFFSET $2)`,
			userID, MaxSubscriptions); err != nil {
			return fmt.Errorf("remind: trim subscriptions: %w", unavailable(err))
		}
		return nil
	})
}

// DeleteSubscription removes the user's subscription of endpoint; false
// when they had none there.
func (s *Store) DeleteSubscription(ctx context.Context, userID int64, endpoint string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM push_subscriptions WHERE endpoint = $1 AND user_id = $2`, endpoint, userID)
	if err != nil {
		return false, fmt.Errorf("remind: delete a subscription: %w", unavailable(err))
	}
	return tag.RowsAffected() > 0, nil
}

// forgetEndpoint removes a subscription its push service called gone.
func (s *Store) forgetEndpoint(ctx context.Context, endpoint string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM push_subscriptions WHERE endpoint = $1`, endpoint); err != nil {
		return fmt.Errorf("remind: forget a subscription: %w", unavailable(err))
	}
	return nil
}

// SetEmail stores the user's address for reminders (replacing theirs).
func (s *Store) SetEmail(ctx context.Context, userID int64, addr, lang string) error {
	if err := ValidAddress(addr); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO reminder_emails (user_id, address, lang) VALUES ($1, $2, $3)
		ON CONFLICT (user_id) DO UPDATE SET address = $2, lang = $3, updated_at = now()`, userID, addr, lang); err != nil {
		return fmt.Errorf("remind: save an address: %w", unavailable(err))
	}
	return nil
}

// DeleteEmail removes the user's address; false when they had none.
func (s *Store) DeleteEmail(ctx context.Context, userID int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM reminder_emails WHERE user_id = $1`, userID)
	if err != nil {
		return false, fmt.Errorf("remind: delete an address: %w", unavailable(err))
	}
	return tag.RowsAffected() > 0, nil
}

// Contacts reads every way to reach the user.
func (s *Store) Contacts(ctx context.Context, userID int64) (Contacts, error) {
	var c Contacts
	rows, err := s.pool.Query(ctx, `SELECT endpoint, p256dh, auth, lang FROM push_subscriptions WHERE user_id = $1 ORDER BY created_at`, userID)
	if err != nil {
		return c, fmt.Errorf("remind: read subscriptions: %w", unavailable(err))
	}
	c.Push, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Subscription, error) {
		var sub Subscription
		err := r.Scan(&sub.Endpoint, &sub.P256dh, &sub.Auth, &sub.Lang)
		return sub, err
	})
	if err != nil {
		return c, fmt.Errorf("remind: read subscriptions: %w", unavailable(err))
	}
	err = s.pool.QueryRow(ctx, `SELECT address, lang FROM reminder_emails WHERE user_id = $1`, userID).Scan(&c.Email, &c.EmailLang)
	if err != nil && err != pgx.ErrNoRows {
		return c, fmt.Errorf("remind: read the address: %w", unavailable(err))
	}
	return c, nil
}

func unavailable(err error) error { return fmt.Errorf("%w: %w", apperr.ErrUnavailable, err) }
