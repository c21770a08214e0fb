package gateway

// Accounts (gateway/openapi.yaml, accounts): registering and logging in.
// Both are anonymous and cost a password hash, so both are behind a limit
// by client address, and a username's failed logins behind one of their
// own, past which a login needs a solved captcha.

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

// register is POST /api/v1/users. An account costs its maker the
// address's budgets (the credentials' and the registrations' own), then
// the challenge (Config.RegisterChallenge), before any password is hashed.
func (s *Server) register(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	if l := s.deps.Gates.Registration; l != nil {
		if err := l.Allow(c.UserContext(), s.clientKey(c)); err != nil {
			return err
		}
	}
	var in api.Credentials
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	if err := checkNonce(in.ChallengeAnswer); err != nil {
		return err
	}
	if err := s.registerChallenge(c, in); err != nil {
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
	solved, err := s.loginCaptcha(c, in)
	if err != nil {
		return err
	}
	names := s.deps.Gates.LoginName
	charged := false
	if names != nil && in.Username != "" {
		err := names.Take(c.UserContext(), in.Username)
		switch {
		case err == nil:
			charged = true
		case !errors.Is(err, apperr.ErrRateLimited) || s.deps.Captchas == nil:
			return err
		case !solved:
			// Refusing the owner's right password too would let anyone
			// lock them out with a few guesses a minute: past the budget a
			// captcha stands in for the unit, and guessing costs one each.
			return errLoginNeedsCaptcha
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

// errLoginNeedsCaptcha answers a login past its username's budget of
// failures without a solved captcha.
var errLoginNeedsCaptcha = apperr.Public(apperr.ErrCaptchaInvalid,
	"too many failed logins for this username: get a captcha (GET /api/v1/captcha) "+
		"and send its captcha_id and captcha_answer with the username and password")

// loginCaptcha judges the captcha a login carries, if any, and spends it
// whatever the verdict, so that each one serves one login; solved is false
// when the login carries none (or no captchas are configured).
func (s *Server) loginCaptcha(c *fiber.Ctx, in api.Credentials) (solved bool, err error) {
	if s.deps.Captchas == nil || (in.CaptchaID == "" && in.CaptchaAnswer == "") {
		return false, nil
	}
	if err := s.deps.Captchas.Check(c.UserContext(), in.CaptchaID, in.CaptchaAnswer); err != nil {
		if errors.Is(err, apperr.ErrCaptchaInvalid) {
			return false, &apperr.PublicError{Kind: apperr.ErrCaptchaInvalid, Cause: err,
				Message: "the captcha answer is missing, wrong or expired: get a new captcha (GET /api/v1/captcha) and log in with its answer"}
		}
		return false, err
	}
	return true, nil
}

// errRegisterNeedsWork answers a registration without a solved proof of
// work.
var errRegisterNeedsWork = apperr.Public(apperr.ErrChallengeInvalid,
	"registering takes a solved proof of work: get one (GET /api/v1/challenges?purpose=register) and send its "+
		"challenge_id and challenge_answer with the username and password")

// registerWork judges a registration's proof of work, spending the
// challenge whatever the verdict.
func (s *Server) registerWork(c *fiber.Ctx, in api.Credentials) error {
	if s.deps.Challenges == nil {
		return apperr.Public(apperr.ErrUnavailable, "registration takes a proof of work, and this server has no challenges")
	}
	if in.ChallengeID == "" || in.ChallengeAnswer == "" {
		return errRegisterNeedsWork
	}
	if err := s.deps.Challenges.SpendRegister(c.UserContext(), in.ChallengeID, in.ChallengeAnswer); err != nil {
		if errors.Is(err, apperr.ErrChallengeInvalid) {
			return &apperr.PublicError{Kind: apperr.ErrChallengeInvalid, Cause: err,
				Message: "the proof of work is wrong, expired or used: get a new challenge (GET /api/v1/challenges?purpose=register) and register with its answer"}
		}
		return err
	}
	return nil
}

// errRegisterNeedsChallenge answers a registration without a solved
// challenge.
var errRegisterNeedsChallenge = apperr.Public(apperr.ErrChallengeInvalid,
	"registering takes a solved captcha: get one (GET /api/v1/captcha) and send its captcha_id and "+
		"captcha_answer with the username and password")

// registerChallenge judges a registration's captcha, spending it whatever
// the verdict; a missing, wrong, expired or used one is 400
// challenge_invalid.
func (s *Server) registerChallenge(c *fiber.Ctx, in api.Credentials) error {
	switch s.cfg.RegisterChallenge {
	case RegisterNone:
		return nil
	case RegisterPoW:
		return s.registerWork(c, in)
	}
	if s.deps.Captchas == nil {
		return apperr.Public(apperr.ErrUnavailable, "registration takes a captcha, and this server has none")
	}
	if in.CaptchaID == "" || in.CaptchaAnswer == "" {
		return errRegisterNeedsChallenge
	}
	if err := s.deps.Captchas.Check(c.UserContext(), in.CaptchaID, in.CaptchaAnswer); err != nil {
		if errors.Is(err, apperr.ErrCaptchaInvalid) {
			return &apperr.PublicError{Kind: apperr.ErrChallengeInvalid, Cause: err,
				Message: "the captcha answer is wrong, expired or used: get a new captcha (GET /api/v1/captcha) and register with its answer"}
		}
		return err
	}
	return nil
}
