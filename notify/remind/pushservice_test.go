package remind_test

// A push service for the tests, as a browser's push service (RFC 8030)
// takes a message: it checks the application server's VAPID signature
// (RFC 8292) against the public key the page subscribed with, and the
// browser's side decrypts the aes128gcm payload (RFC 8291) with the
// subscription's private key and secret. Nothing is taken on trust: a
// message the sender signed or encrypted wrongly fails the test.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/seckill/notify/remind"
)

// browser is one subscribed browser: its keys and what its push service
// delivered to it.
type browser struct {
	key    *ecdh.PrivateKey
	secret []byte

	mu        sync.Mutex
	delivered [][]byte
	refusals  []string
	// failFirst is how many deliveries answer 503 before one is taken.
	failFirst int
	tries     int
}

func (b *browser) subscription(endpoint string) remind.Subscription {
	return remind.Subscription{Endpoint: endpoint,
		P256dh: base64.RawURLEncoding.EncodeToString(b.key.PublicKey().Bytes()),
		Auth:   base64.RawURLEncoding.EncodeToString(b.secret), Lang: remind.LangEnglish}
}

func (b *browser) messages() [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]byte(nil), b.delivered...)
}

// pushService is a TLS push service whose endpoints are /push/<name>; an
// endpoint under /gone/ answers 410 as a service does for an unsubscribed
// browser.
type pushService struct {
	srv      *httptest.Server
	vapidKey string // the public key every message must be signed with

	mu       sync.Mutex
	browsers map[string]*browser
}

func newPushService(t *testing.T, vapidPublic string) *pushService {
	t.Helper()
	p := &pushService{vapidKey: vapidPublic, browsers: map[string]*browser{}}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// subscribe makes a browser with fresh keys behind endpoint path.
func (p *pushService) subscribe(t *testing.T, path string) (*browser, remind.Subscription) {
	t.Helper()
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{key: key, secret: make([]byte, 16)}
	_, _ = rand.Read(b.secret)
	p.mu.Lock()
	p.browsers[path] = b
	p.mu.Unlock()
	return b, b.subscription(p.srv.URL + path)
}

func (p *pushService) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	b := p.browsers[r.URL.Path]
	p.mu.Unlock()
	if b == nil {
		http.NotFound(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/gone/") {
		w.WriteHeader(http.StatusGone)
		return
	}
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.tries++
	busy := b.tries <= b.failFirst
	b.mu.Unlock()
	if busy {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	err := p.checkVAPID(r)
	var plain []byte
	if err == nil {
		plain, err = b.decrypt(r.Header.Get("Content-Encoding"), body)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.refusals = append(b.refusals, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.delivered = append(b.delivered, plain)
	w.WriteHeader(http.StatusCreated)
}

// checkVAPID verifies Authorization: vapid t=<JWT>, k=<key> (RFC 8292):
// k is the key the page subscribed with, the JWT is ES256 over it, its
// aud is this service's origin and its exp within a day.
func (p *pushService) checkVAPID(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "vapid ")
	if !ok {
		return fmt.Errorf("no vapid authorization: %q", auth)
	}
	var token, k string
	for _, part := range strings.Split(rest, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch name {
		case "t":
			token = value
		case "k":
			k = value
		}
	}
	if k != strings.TrimRight(p.vapidKey, "=") {
		return fmt.Errorf("signed with key %q, not the subscribed %q", k, p.vapidKey)
	}
	raw, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil {
		return err
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		return err
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("the token is not a JWT")
	}
	var header struct{ Alg, Typ string }
	if err := decodeSegment(parts[0], &header); err != nil || header.Alg != "ES256" {
		return fmt.Errorf("header %+v: %v", header, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return errors.New("the signature is not 64 bytes of r||s")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return errors.New("the VAPID signature does not verify")
	}
	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return err
	}
	if claims.Aud != "https://"+r.Host {
		return fmt.Errorf("aud %q is not this service's origin https://%s", claims.Aud, r.Host)
	}
	if exp := time.Unix(claims.Exp, 0); exp.Before(time.Now()) || exp.After(time.Now().Add(24*time.Hour)) {
		return fmt.Errorf("exp %v not within a day", exp)
	}
	if !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https:") {
		return fmt.Errorf("sub %q is no contact", claims.Sub)
	}
	return nil
}

func decodeSegment(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// decrypt opens an aes128gcm body (RFC 8188) with the keys RFC 8291
// derives from the browser's private key and secret.
func (b *browser) decrypt(encoding string, body []byte) ([]byte, error) {
	if encoding != "aes128gcm" {
		return nil, fmt.Errorf("content encoding %q", encoding)
	}
	if len(body) < 21 {
		return nil, errors.New("body shorter than its header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("key id of %d bytes, not the sender's 65-byte public key", idlen)
	}
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		return nil, err
	}
	record := body[21+idlen:]
	if uint32(len(record)) > rs {
		return nil, fmt.Errorf("a record of %d bytes over the record size %d", len(record), rs)
	}
	shared, err := b.key.ECDH(asPub)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), b.key.PublicKey().Bytes()...), asPub.Bytes()...)
	ikm, err := hkdf.Key(sha256.New, shared, b.secret, string(info), 32)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, record, nil)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("no last-record delimiter")
	}
	return plain[:len(plain)-1], nil
}

func newKey() (*ecdh.PrivateKey, error) { return ecdh.P256().GenerateKey(rand.Reader) }
