package app

import (
	"fmt"
	"io"

	"github.com/flashsale/seckill/notify/remind"
)

// writeVAPIDKeys prints a new VAPID key pair as the two settings that turn
// Web Push reminders on. The subject is not part of the pair: it stays
// SECKILL_VAPID_SUBJECT's.
func writeVAPIDKeys(w io.Writer) error {
	keys, err := remind.GenerateVAPID("")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "SECKILL_VAPID_PUBLIC_KEY=%s\nSECKILL_VAPID_PRIVATE_KEY=%s\n", keys.PublicKey, keys.PrivateKey)
	return err
}
