package api

// Captcha is a captcha to answer before a buy or a join that needs one (the
// `Captcha` object).
type Captcha struct {
	CaptchaID string `json:"captcha_id"`
	// Image is a data:image/png;base64 URL.
	Image string `json:"image"`
}

// BreakerMode is the body of PUT /api/v1/admin/breaker: auto, open or
// closed.
type BreakerMode struct {
	Mode string `json:"mode"`
}

// Breaker is the fleet-wide breaker mode and this instance's breaker state
// (the `Breaker` object).
type Breaker struct {
	Mode  string `json:"mode"`
	State string `json:"state"`
	// Paths is each dependency path's state, when the breaker has paths.
	Paths map[string]string `json:"paths,omitempty"`
}

// Health is the body of GET /healthz: {"status":"ok"}.
type Health struct {
	Status string `json:"status"`
}

// Ready is the body of GET /readyz when every check passed:
// {"checks":{"<name>":"ok",...},"status":"ready"}. Checks comes first
// because the body has always been written with its keys in order.
type Ready struct {
	Checks map[string]string `json:"checks"`
	Status string            `json:"status"`
}
