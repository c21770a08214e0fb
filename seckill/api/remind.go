package api

// PushKey is the answer of GET /api/v1/push/key (the `PushKey` object):
// the VAPID public key, base64url, a page subscribes with.
type PushKey struct {
	PublicKey string `json:"public_key"`
}

// PushSubscription is the body of POST /api/v1/push/subscriptions (the
// `PushSubscription` object): what a browser's PushSubscription.toJSON()
// gives. expirationTime, which browsers add, is taken and ignored.
type PushSubscription struct {
	Endpoint       string   `json:"endpoint"`
	Keys           PushKeys `json:"keys"`
	ExpirationTime *float64 `json:"expirationTime,omitempty"`
}

// PushKeys are a subscription's keys, base64url.
type PushKeys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// Subscribed answers a saved subscription (the `Subscribed` object).
type Subscribed struct {
	Endpoint string `json:"endpoint"`
}

// ReminderEmailSet is the body of PUT /api/v1/reminders/email (the
// `ReminderEmailSet` object).
type ReminderEmailSet struct {
	Address string `json:"address"`
}

// ReminderEmail is the answer of PUT /api/v1/reminders/email (the
// `ReminderEmail` object). Verified is always false: the address is not
// verified.
type ReminderEmail struct {
	Address  string `json:"address"`
	Verified bool   `json:"verified"`
}

// Removed answers a removal (the `Removed` object): false when there was
// nothing to remove.
type Removed struct {
	Removed bool `json:"removed"`
}
