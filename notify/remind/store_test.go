package remind_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/seckill/apperr"
)

func validSub(t *testing.T, endpoint string) remind.Subscription {
	t.Helper()
	b := &browser{secret: make([]byte, 16)}
	var err error
	b.key, err = newKey()
	require.NoError(t, err)
	_, _ = rand.Read(b.secret)
	return b.subscription(endpoint)
}

// What a client sends wrong is invalid input naming the field, and is not
// stored; the error never repeats an address.
func TestContactsRefuseBadInput(t *testing.T) {
	ctx := context.Background()
	store := remind.NewStore(stack.NewDatabase(t))
	good := validSub(t, "https://push.example/a")
	for name, sub := range map[string]remind.Subscription{
		"http endpoint":  {Endpoint: "http://push.example/a", P256dh: good.P256dh, Auth: good.Auth},
		"no endpoint":    {P256dh: good.P256dh, Auth: good.Auth},
		"long endpoint":  {Endpoint: "https://push.example/" + strings.Repeat("a", 1100), P256dh: good.P256dh, Auth: good.Auth},
		"short key":      {Endpoint: good.Endpoint, P256dh: base64.RawURLEncoding.EncodeToString([]byte("short")), Auth: good.Auth},
		"key not base64": {Endpoint: good.Endpoint, P256dh: "!!!", Auth: good.Auth},
		"short secret":   {Endpoint: good.Endpoint, P256dh: good.P256dh, Auth: "AAAA"},
		"star in host":   {Endpoint: "https://push.example*", P256dh: good.P256dh, Auth: good.Auth},
		"space in path":  {Endpoint: "https://push.example/a b", P256dh: good.P256dh, Auth: good.Auth},
		"bad port":       {Endpoint: "https://push.example:99999x/a", P256dh: good.P256dh, Auth: good.Auth},
	} {
		err := store.SaveSubscription(ctx, 7, sub)
		require.ErrorIs(t, err, apperr.ErrInvalidInput, name)
	}
	for _, addr := range []string{"", "no-at-sign", "Name <a@b.example>", "a@b", "a@b.example\r\nBcc: x@y.example",
		strings.Repeat("a", 250) + "@b.example"} {
		err := store.SetEmail(ctx, 7, addr, remind.LangEnglish)
		require.ErrorIs(t, err, apperr.ErrInvalidInput, "%q", addr)
		if addr != "" {
			require.NotContains(t, err.Error(), addr)
		}
	}
	c, err := store.Contacts(ctx, 7)
	require.NoError(t, err)
	require.Empty(t, c.Push)
	require.Empty(t, c.Email)
}

// Many browsers of one shopper subscribing at once keep at most
// MaxSubscriptions, the newest; a subscription and an address are removed
// by their owner only.
func TestSubscriptionsStayBounded(t *testing.T) {
	ctx := context.Background()
	store := remind.NewStore(stack.NewDatabase(t))
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			errs <- store.SaveSubscription(ctx, 9, validSub(t, "https://push.example/b"+strings.Repeat("x", i)))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		// Concurrent trims may deadlock one another in PostgreSQL, which
		// then refuses one: a 503 to retry, never a lost invariant.
		if err != nil {
			require.True(t, errors.Is(err, apperr.ErrUnavailable), "%v", err)
		}
	}
	c, err := store.Contacts(ctx, 9)
	require.NoError(t, err)
	require.LessOrEqual(t, len(c.Push), remind.MaxSubscriptions)
	require.NotEmpty(t, c.Push)

	removed, err := store.DeleteSubscription(ctx, 10, c.Push[0].Endpoint)
	require.NoError(t, err)
	require.False(t, removed, "someone else's subscription")
	removed, err = store.DeleteSubscription(ctx, 9, c.Push[0].Endpoint)
	require.NoError(t, err)
	require.True(t, removed)

	require.NoError(t, store.SetEmail(ctx, 9, "nine@mail.example", remind.LangChinese))
	removed, err = store.DeleteEmail(ctx, 10)
	require.NoError(t, err)
	require.False(t, removed)
	c, err = store.Contacts(ctx, 9)
	require.NoError(t, err)
	require.Equal(t, "nine@mail.example", c.Email)
	require.Equal(t, remind.LangChinese, c.EmailLang)
}

// The mailer takes an smtp:// URL and a From address of any host
// (seckill@localhost is the default); anything else is refused at start.
func TestMailerConfig(t *testing.T) {
	_, err := remind.NewMailer("smtp://relay.example:587", "seckill@localhost")
	require.NoError(t, err)
	_, err = remind.NewMailer("smtp://user:pass@relay.example", "Shop <shop@example.com>")
	require.Error(t, err, "a display name is not a bare address")
	for _, bad := range []string{"", "relay.example:25", "http://relay.example", "smtp://"} {
		_, err = remind.NewMailer(bad, "shop@example.com")
		require.Error(t, err, bad)
	}
}
