package remind

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
)

// errGone is a subscription its push service no longer knows (404, 410):
// it is deleted, never retried.
var errGone = errors.New("remind: the push subscription is gone")

// permanent marks a failure that a retry cannot mend (a refused message).
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// VAPID is the application server's key pair of Web Push (RFC 8292),
// base64url as webpush-go takes them, and the contact it names.
type VAPID struct {
	PublicKey, PrivateKey string
	// Subject is a mailto: address or an https: URL the push services
	// may reach the operator at.
	Subject string
}

// Pusher sends Web Push messages (RFC 8030, encrypted per RFC 8291,
// signed per RFC 8292).
type Pusher struct {
	keys   VAPID
	client *http.Client
}

// NewPusher returns a pusher with keys; client nil means a client with a
// 10-second timeout.
func NewPusher(keys VAPID, client *http.Client) *Pusher {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Pusher{keys: keys, client: client}
}

// PublicKey is the key a page subscribes with (applicationServerKey).
func (p *Pusher) PublicKey() string { return p.keys.PublicKey }

// pushPayload is what the service worker (web/sw.js) reads from a push.
type pushPayload struct {
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	URL       string    `json:"url"`
	VoucherID string    `json:"voucher_id"`
	Until     time.Time `json:"until"`
}

// Push sends m to sub, to live until the turn ends. A 404 or 410 is
// errGone; another 4xx is permanent.
func (p *Pusher) Push(ctx context.Context, sub Subscription, t Turn, m Message) error {
	body, err := json.Marshal(pushPayload{Title: m.Title, Body: m.Body, URL: m.URL,
		VoucherID: fmt.Sprint(t.VoucherID), Until: m.Until.UTC()})
	if err != nil {
		return permanent{err}
	}
	ttl := int(time.Until(m.Until).Seconds())
	if ttl < 1 {
		ttl = 1
	}
	subject := strings.TrimPrefix(p.keys.Subject, "mailto:") // webpush-go adds it back
	resp, err := webpush.SendNotificationWithContext(ctx, body, &webpush.Subscription{
		Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.P256dh, Auth: sub.Auth},
	}, &webpush.Options{HTTPClient: p.client, Subscriber: subject, TTL: ttl, Urgency: webpush.UrgencyHigh,
		VAPIDPublicKey: p.keys.PublicKey, VAPIDPrivateKey: p.keys.PrivateKey,
		// One reminder per sale: a later one replaces an undelivered one.
		Topic: fmt.Sprintf("v%d", t.VoucherID)})
	if err != nil {
		return fmt.Errorf("remind: push: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return errGone
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("remind: push service answered %s", resp.Status)
	default:
		return permanent{fmt.Errorf("remind: push service refused the message: %s", resp.Status)}
	}
}

// Mailer sends e-mail through one SMTP server with net/smtp.
type Mailer struct {
	addr string // host:port
	auth smtp.Auth
	from string
	host string
}

// NewMailer reads smtpURL (smtp://user:pass@host:port; no user: no AUTH)
// and the From address. Credentials go over the wire only where net/smtp
// allows PLAIN: TLS (STARTTLS offered) or localhost.
func NewMailer(smtpURL, from string) (*Mailer, error) {
	u, err := url.Parse(smtpURL)
	if err != nil || u.Scheme != "smtp" || u.Host == "" {
		return nil, errors.New("remind: the SMTP URL must look like smtp://user:password@host:port")
	}
	// The sender may be a local name (seckill@localhost): only its form
	// is checked, not a public domain.
	if a, err := mail.ParseAddress(from); err != nil || a.Address != from {
		return nil, errors.New("remind: the From address is not an e-mail address (name@host)")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, "25"
	}
	m := &Mailer{addr: net.JoinHostPort(host, port), from: from, host: host}
	if u.User != nil {
		pass, _ := u.User.Password()
		m.auth = smtp.PlainAuth("", u.User.Username(), pass, host)
	}
	return m, nil
}

// Mail sends m to addr. net/smtp has no context: ctx bounds only the
// dial, and the server's answers are bounded by a deadline.
func (ml *Mailer) Mail(ctx context.Context, addr, lang string, t Turn, m Message) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", ml.addr)
	if err != nil {
		return fmt.Errorf("remind: dial the SMTP server: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	c, err := smtp.NewClient(conn, ml.host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("remind: SMTP greeting: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(nil); err != nil {
			return fmt.Errorf("remind: STARTTLS: %w", err)
		}
	}
	if ml.auth != nil {
		if err := c.Auth(ml.auth); err != nil {
			return permanent{fmt.Errorf("remind: SMTP AUTH: %w", err)}
		}
	}
	if err := c.Mail(ml.from); err != nil {
		return fmt.Errorf("remind: MAIL FROM: %w", err)
	}
	if err := c.Rcpt(addr); err != nil {
		// The address, personal data, stays out of the error.
		return permanent{fmt.Errorf("remind: the server refused the recipient: %w", redact(err, addr))}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("remind: DATA: %w", err)
	}
	if _, err := io.WriteString(w, ml.compose(addr, lang, t, m)); err != nil {
		return fmt.Errorf("remind: write the message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("remind: end the message: %w", err)
	}
	return c.Quit()
}

// compose is the whole message: headers (the subject in RFC 2047 words)
// and a UTF-8 plain text body, in quoted-printable-free 8bit.
func (ml *Mailer) compose(addr, lang string, t Turn, m Message) string {
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\n", ml.from)
	fmt.Fprintf(&b, "To: %s\r\n", addr)
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.BEncoding.Encode("UTF-8", m.Subject))
	fmt.Fprintf(&b, "Date: %s\r\n", time.Now().UTC().Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s@%s>\r\n", hex.EncodeToString(id), ml.host)
	fmt.Fprintf(&b, "Content-Language: %s\r\n", lang)
	fmt.Fprintf(&b, "X-Seckill-Voucher: %d\r\n", t.VoucherID)
	fmt.Fprintf(&b, "X-Seckill-Until: %s\r\n", m.Until.UTC().Format(time.RFC3339))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	b.WriteString(mailBody(lang, m))
	return b.String()
}

// redact keeps addr out of an error's text.
func redact(err error, addr string) error {
	return errors.New(strings.ReplaceAll(err.Error(), addr, "<address>"))
}
