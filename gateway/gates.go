package gateway

import "context"

// Gates are the limits of the routes other than the buy (gateway/edge
// implements them; the buy's own steps are buy.Steps, in the pipeline of
// Deps.Buy). A nil field passes everything.
type Gates struct {
	// Credentials guards POST /api/v1/users and /api/v1/sessions against
	// password guessing, by client IP (429). GET /api/v1/captcha has a
	// budget of its own (CaptchaIssue).
	Credentials IPLimiter
	// Registration bounds POST /api/v1/users alone by client IP (429),
	// beside Credentials: the accounts one address may make.
	Registration IPLimiter
	// CaptchaIssue bounds GET /api/v1/captcha by client IP (429), with its
	// own budget: shoppers behind one address must not lock each other out
	// of logging in by asking for captchas.
	CaptchaIssue IPLimiter
	// Anonymous bounds every anonymous route by client address (the
	// catalog, captcha, registration, login and the WebSocket handshake;
	// see Server.perAddress) before it does any work (429). It must cost no
	// I/O: the catalog is served from memory and this limit is in front of it.
	Anonymous IPLimiter
	// LoginName bounds the failed logins of one username, whatever the
	// addresses they come from: a credential-stuffing bot rotating
	// addresses still meets it. Past it a login needs a solved captcha
	// (400 captcha_invalid without one), so that guesses cannot lock the
	// owner out; without Deps.Captchas it is 429.
	LoginName NameLimiter
	// Shopper bounds the signed-in routes other than the buy (a shopper's
	// orders, one order, pay, cancel, the waiting room's join and read, and
	// the WebSocket's handshake with a token) by user and by client address,
	// after the token is verified and before the route does any work (429;
	// see Server.perShopper).
	Shopper ShopperLimiter
}

// ShopperLimiter admits or refuses one request of a signed-in shopper from a
// client address (Server.clientKey's key). set receives the RateLimit
// headers of the answer, whatever it turns out to be.
type ShopperLimiter interface {
	Allow(ctx context.Context, userID int64, clientKey string, set func(key, value string)) error
}

// NameLimiter bounds the failed logins of one username. A login takes one
// unit of the username's budget before its password is checked, atomically,
// so concurrent guesses cannot all pass a check made before any of them is
// charged; a login that did not fail on its password gives the unit back.
type NameLimiter interface {
	// Take charges one login to the username, or refuses it
	// (ErrRateLimited, charging nothing) when its budget is spent: the
	// login then needs a solved captcha.
	Take(ctx context.Context, username string) error
	// Refund gives back the unit Take charged, for a login that was not a
	// wrong password.
	Refund(ctx context.Context, username string)
}

// IPLimiter admits or refuses one request from a client address. The key is
// Server.clientKey's: the address for IPv4, the /56 for IPv6, and it honours
// Config.TrustedProxies.
type IPLimiter interface {
	Allow(ctx context.Context, clientIP string) error
}
