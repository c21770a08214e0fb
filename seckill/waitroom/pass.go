package waitroom

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"
	"time"
)

// signer makes and checks the HMACs of the room: admission passes and the
// random pre-queue places. One key serves both, each under its own label.
type signer struct{ key []byte }

// place is the user's random place in the voucher's pre-queue: 52 bits of
// HMAC(key, voucher, user). It is fixed for the pair (joining again draws
// the same number), unknown to anyone without the key, and below 2^52, so
// every place after begin_at (2^52 + arrival) sorts behind it and a float64
// score holds it exactly.
func (s signer) place(voucherID, userID int64) uint64 {
	m := hmac.New(sha256.New, s.key)
	var b [17]byte
	b[0] = 'q'
	binary.BigEndian.PutUint64(b[1:], uint64(voucherID))
	binary.BigEndian.PutUint64(b[9:], uint64(userID))
	m.Write(b[:])
	return binary.BigEndian.Uint64(m.Sum(nil)) >> 12
}

// passVersion starts every pass, so the format can change later.
const passVersion = "p1"

// Pass is the content of an admission pass: it admits UserID to buy
// VoucherID until ExpiresAt.
type Pass struct {
	VoucherID int64
	UserID    int64
	ExpiresAt time.Time
}

// sign encodes p as "p1.<voucher>.<user>.<expiry ms>.<HMAC>", the header
// value Seckill-Pass carries.
func (s signer) sign(p Pass) string {
	body := passVersion + "." + strconv.FormatInt(p.VoucherID, 10) + "." +
		strconv.FormatInt(p.UserID, 10) + "." + strconv.FormatInt(p.ExpiresAt.UnixMilli(), 10)
	return body + "." + s.mac(body)
}

func (s signer) mac(body string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("pass:"))
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// open checks the signature of a pass and returns what it says; ok is false
// for anything this room did not sign. It costs no I/O.
func (s signer) open(pass string) (Pass, bool) {
	if len(pass) > 200 {
		return Pass{}, false
	}
	i := strings.LastIndexByte(pass, '.')
	if i < 0 {
		return Pass{}, false
	}
	body, sig := pass[:i], pass[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac(body))) {
		return Pass{}, false
	}
	f := strings.Split(body, ".")
	if len(f) != 4 || f[0] != passVersion {
		return Pass{}, false
	}
	v, err1 := strconv.ParseInt(f[1], 10, 64)
	u, err2 := strconv.ParseInt(f[2], 10, 64)
	ms, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Pass{}, false
	}
	return Pass{VoucherID: v, UserID: u, ExpiresAt: time.UnixMilli(ms)}, true
}
