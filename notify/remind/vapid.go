package remind

import (
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	webpush "github.com/SherClockHolmes/webpush-go"
)

// GenerateVAPID makes a new key pair for subject.
func GenerateVAPID(subject string) (VAPID, error) {
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return VAPID{}, fmt.Errorf("remind: generate VAPID keys: %w", err)
	}
	return VAPID{PublicKey: pub, PrivateKey: priv, Subject: subject}, nil
}

// CheckVAPID says whether public and private, base64url as GenerateVAPID
// writes them (padded or not), are one P-256 key pair: a pair that is not
// signs pushes every push service refuses, and a mistyped setting would
// only show as reminders that never arrive.
func CheckVAPID(public, private string) error {
	priv, err := decodeVAPIDKey(private)
	if err != nil {
		return fmt.Errorf("remind: the VAPID private key is not base64url: %w", err)
	}
	key, err := ecdh.P256().NewPrivateKey(priv)
	if err != nil {
		return fmt.Errorf("remind: the VAPID private key is not a P-256 key: %w", err)
	}
	pub, err := decodeVAPIDKey(public)
	if err != nil {
		return fmt.Errorf("remind: the VAPID public key is not base64url: %w", err)
	}
	if !bytes.Equal(pub, key.PublicKey().Bytes()) {
		return errors.New("remind: the VAPID public key is not the private key's")
	}
	return nil
}

// decodeVAPIDKey reads base64url with or without its padding.
func decodeVAPIDKey(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(s), "="))
}

// DevVAPID reads the key pair kept at path, or makes one and keeps it
// there (mode 0600): dev mode's pages stay subscribed across restarts,
// since a browser's subscription is bound to the public key.
func DevVAPID(path, subject string) (VAPID, error) {
	var keys VAPID
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var kept struct{ Public, Private string }
		if err := json.Unmarshal(b, &kept); err != nil || kept.Public == "" || kept.Private == "" {
			return keys, fmt.Errorf("remind: %s holds no VAPID keys (remove it to make new ones)", path)
		}
		return VAPID{PublicKey: kept.Public, PrivateKey: kept.Private, Subject: subject}, nil
	case !errors.Is(err, os.ErrNotExist):
		return keys, fmt.Errorf("remind: read VAPID keys: %w", err)
	}
	if keys, err = GenerateVAPID(subject); err != nil {
		return keys, err
	}
	b, _ = json.Marshal(struct{ Public, Private string }{keys.PublicKey, keys.PrivateKey})
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return keys, fmt.Errorf("remind: keep VAPID keys: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return keys, fmt.Errorf("remind: keep VAPID keys: %w", err)
	}
	return keys, nil
}
