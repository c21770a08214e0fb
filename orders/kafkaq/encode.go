package kafkaq

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
)

// Encode is the message value of r: the bytes json.Marshal(r) makes, which
// Decode reads. Every accepted buy publishes one, so the common reservation
// (a UTC time of years 0 to 9999, a request key of printable ASCII that
// JSON writes as it is) is written by hand, with one allocation; anything
// else goes to json.Marshal. FuzzEncode holds the two to the same bytes.
func Encode(r seckill.Reservation) ([]byte, error) {
	if !api.PlainText(r.RequestKey) || !plainTime(r.ReservedAt) {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("kafkaq: encode: %w", err)
		}
		return b, nil
	}
	// Room for the longest: four int64s, the names, a time with nanoseconds.
	b := make([]byte, 0, 208+len(r.RequestKey))
	b = append(b, `{"order_id":"`...)
	b = strconv.AppendInt(b, r.OrderID, 10)
	b = append(b, `","voucher_id":"`...)
	b = strconv.AppendInt(b, r.VoucherID, 10)
	b = append(b, `","user_id":"`...)
	b = strconv.AppendInt(b, r.UserID, 10)
	b = append(b, `","quantity":`...)
	b = strconv.AppendInt(b, r.Quantity, 10)
	if r.RequestKey != "" {
		b = append(b, `,"request_key":"`...)
		b = append(b, r.RequestKey...)
		b = append(b, '"')
	}
	b = append(b, `,"reserved_at":"`...)
	b = r.ReservedAt.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...), nil
}

// plainTime says whether time.Time's MarshalJSON writes t as RFC3339Nano
// does: at offset zero ("Z") and within its years 0 to 9999.
func plainTime(t time.Time) bool {
	_, offset := t.Zone()
	y := t.Year()
	return offset == 0 && y >= 0 && y <= 9999
}
