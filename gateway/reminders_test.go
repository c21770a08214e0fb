package gateway

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify/remind"
	"github.com/flashsale/seckill/seckill/api"
)

// memReminders keeps contacts in memory, checked as remind.Store checks
// them.
type memReminders struct {
	mu     sync.Mutex
	subs   map[string]remind.Subscription // by endpoint
	owners map[string]int64
	emails map[int64]string
	langs  map[int64]string
}

func newMemReminders() *memReminders {
	return &memReminders{subs: map[string]remind.Subscription{}, owners: map[string]int64{},
		emails: map[int64]string{}, langs: map[int64]string{}}
}

func (m *memReminders) SaveSubscription(_ context.Context, userID int64, sub remind.Subscription) error {
	if err := remind.ValidSubscription(sub); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subs[sub.Endpoint], m.owners[sub.Endpoint] = sub, userID
	return nil
}

func (m *memReminders) DeleteSubscription(_ context.Context, userID int64, endpoint string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if owner, ok := m.owners[endpoint]; !ok || owner != userID {
		return false, nil
	}
	delete(m.subs, endpoint)
	delete(m.owners, endpoint)
	return true, nil
}

func (m *memReminders) SetEmail(_ context.Context, userID int64, addr, lang string) error {
	if err := remind.ValidAddress(addr); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.emails[userID], m.langs[userID] = addr, lang
	return nil
}

func (m *memReminders) DeleteEmail(_ context.Context, userID int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.emails[userID]
	delete(m.emails, userID)
	return ok, nil
}

func browserKeys(t *testing.T) (p256dh, auth string) {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	return base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(secret)
}

// Without push configured the key and subscribing answer 503; the routes
// of a shopper want a token.
func TestRemindersOffAnswer503(t *testing.T) {
	b := setup(t)
	resp, body := b.do(t, "GET", "/api/v1/push/key", "")
	requireAPIError(t, resp, body, http.StatusServiceUnavailable, "unavailable")
	p, a := browserKeys(t)
	sub := `{"endpoint":"https://push.example/x","keys":{"p256dh":"` + p + `","auth":"` + a + `"}}`
	resp, body = b.do(t, "POST", "/api/v1/push/subscriptions", sub, "Authorization", bearerOf(b.shopper))
	requireAPIError(t, resp, body, http.StatusServiceUnavailable, "unavailable")
	resp, body = b.do(t, "PUT", "/api/v1/reminders/email", `{"address":"a@b.example"}`)
	requireAPIError(t, resp, body, http.StatusUnauthorized, "unauthenticated")
}

// A shopper saves and removes a browser's subscription and their address;
// bad input is 400 naming the field; the address never reaches the log.
func TestRemindersSaveAndRemove(t *testing.T) {
	mem := newMemReminders()
	b := setup(t, func(_ *Config, d *testDeps) { d.Reminders, d.PushKey = mem, "BPubKey" })
	auth := []string{"Authorization", bearerOf(b.shopper)}

	resp, body := b.do(t, "GET", "/api/v1/push/key", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "BPubKey", decode[api.PushKey](t, body).PublicKey)

	p, a := browserKeys(t)
	endpoint := "https://push.example/send/abc"
	sub := `{"endpoint":"` + endpoint + `","expirationTime":null,"keys":{"p256dh":"` + p + `","auth":"` + a + `"}}`
	resp, body = b.do(t, "POST", "/api/v1/push/subscriptions", sub, append(auth, "Accept-Language", "zh-CN,zh;q=0.9")...)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	require.Equal(t, endpoint, decode[api.Subscribed](t, body).Endpoint)
	require.Equal(t, remind.LangChinese, mem.subs[endpoint].Lang)
	require.EqualValues(t, 42, mem.owners[endpoint])

	for bad, field := range map[string]string{
		`{"endpoint":"http://push.example/x","keys":{"p256dh":"` + p + `","auth":"` + a + `"}}`: "/endpoint",
		`{"endpoint":"https://push.example/x","keys":{"p256dh":"AAAA","auth":"` + a + `"}}`:     "/keys/p256dh",
		`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + p + `","auth":"AA"}}`:       "/keys/auth",
		`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + p + `"},"extra":1}`:         "",
	} {
		resp, body = b.do(t, "POST", "/api/v1/push/subscriptions", bad, auth...)
		msg := requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
		if field != "" {
			require.Contains(t, string(body), field, msg)
		}
	}

	resp, body = b.do(t, "DELETE", "/api/v1/push/subscriptions?endpoint="+url.QueryEscape(endpoint), "", "Authorization", bearerOf(b.shopper2))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.False(t, decode[api.Removed](t, body).Removed, "someone else's subscription stays")
	resp, body = b.do(t, "DELETE", "/api/v1/push/subscriptions?endpoint="+url.QueryEscape(endpoint), "", auth...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, decode[api.Removed](t, body).Removed, string(body))
	resp, body = b.do(t, "DELETE", "/api/v1/push/subscriptions", "", auth...)
	requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")

	const addr = "ada.private@mail.example"
	resp, body = b.do(t, "PUT", "/api/v1/reminders/email", `{"address":"`+addr+`"}`, append(auth, "Accept-Language", "en-GB")...)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	got := decode[api.ReminderEmail](t, body)
	require.Equal(t, addr, got.Address)
	require.False(t, got.Verified)
	require.Equal(t, remind.LangEnglish, mem.langs[42])
	for _, bad := range []string{`{"address":"not an address"}`, `{"address":"Ada <a@b.example>"}`, `{"address":""}`,
		`{"address":"a@b.example","verified":true}`, `{}`} {
		resp, body = b.do(t, "PUT", "/api/v1/reminders/email", bad, auth...)
		requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	}
	for _, had := range []bool{true, false} {
		resp, body = b.do(t, "DELETE", "/api/v1/reminders/email", "", auth...)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, had, decode[api.Removed](t, body).Removed, string(body))
	}
	require.False(t, strings.Contains(b.logs.String(), addr), "the address is never logged")
}
