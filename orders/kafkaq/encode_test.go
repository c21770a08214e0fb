package kafkaq_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
)

// FuzzEncode holds the hand-written message to json.Marshal's bytes, and to
// its refusals, whatever the reservation: odd request keys and times go
// to json.Marshal itself, the rest must come out the same.
func FuzzEncode(f *testing.F) {
	f.Add(int64(7340032145), int64(42), int64(10000001), int64(1), "bench-17", int64(1796464800123456789), 0)
	f.Add(int64(1), int64(2), int64(3), int64(2), "", int64(0), 0)
	f.Add(int64(-1), int64(0), int64(9223372036854775807), int64(-5), `a"b\c<d>&é`+"\u2028\x00", int64(-62135596800000000), 3600)
	f.Add(int64(1), int64(1), int64(1), int64(1), "k", int64(253402300799999999), -1800)
	f.Fuzz(func(t *testing.T, order, voucher, user, qty int64, key string, at int64, offset int) {
		for _, when := range []time.Time{time.Unix(0, at).UTC(), time.Unix(0, at).In(time.FixedZone("", offset)),
			time.Unix(at, 0).UTC(), time.Unix(0, at)} {
			r := seckill.Reservation{OrderID: order, VoucherID: voucher, UserID: user, Quantity: qty, RequestKey: key, ReservedAt: when}
			want, wantErr := json.Marshal(r)
			got, err := kafkaq.Encode(r)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("Encode(%+v) error %v, json.Marshal error %v", r, err, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Encode(%+v)\n = %s\nwant %s", r, got, want)
			}
		}
	})
}

// TestEncodeDecodes: what Encode writes, Decode reads back.
func TestEncodeDecodes(t *testing.T) {
	r := reservation(42, 9)
	r.RequestKey = "bench-42"
	b, err := kafkaq.Encode(r)
	require.NoError(t, err)
	got, err := kafkaq.Decode(b)
	require.NoError(t, err)
	require.Equal(t, r, got)
}

// BenchmarkEncode is the message of one accepted buy, by hand and by
// json.Marshal.
func BenchmarkEncode(b *testing.B) {
	r := seckill.Reservation{OrderID: 7340032145, VoucherID: 42, UserID: 10000001, Quantity: 1, RequestKey: "bench-17",
		ReservedAt: time.Now().UTC()}
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := kafkaq.Encode(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
