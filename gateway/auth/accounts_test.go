package auth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/flashsale/seckill/seckill/apperr"
)

// memUsers is an in-test UserStore: the domain interface of this package,
// kept in a map.
type memUsers struct {
	mu     sync.Mutex
	byName map[string]User
	nextID int64
	err    error
}

func newMemUsers() *memUsers { return &memUsers{byName: map[string]User{}} }

func (m *memUsers) CreateUser(_ context.Context, username, hash string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return 0, m.err
	}
	if _, ok := m.byName[username]; ok {
		return 0, fmt.Errorf("%w: %s", apperr.ErrUsernameTaken, username)
	}
	m.nextID++
	m.byName[username] = User{ID: m.nextID, Username: username, PasswordHash: hash}
	return m.nextID, nil
}

func (m *memUsers) UserByName(_ context.Context, username string) (User, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return User{}, m.err
	}
	u, ok := m.byName[username]
	if !ok {
		return User{}, fmt.Errorf("user %q: %w", username, apperr.ErrNotFound)
	}
	return u, nil
}

func TestDummyHashMatchesCost(t *testing.T) {
	t.Parallel()
	cost, err := bcrypt.Cost([]byte(dummyHash))
	require.NoError(t, err)
	require.Equal(t, hashCost, cost, "the dummy hash must cost what a real one costs")
}

func TestPasswords(t *testing.T) {
	t.Parallel()
	h, err := HashPassword("correct horse")
	require.NoError(t, err)
	require.NoError(t, CheckPassword(h, "correct horse"))
	require.ErrorIs(t, CheckPassword(h, "correct horsE"), apperr.ErrUnauthenticated)

	_, err = HashPassword("short")
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, err = HashPassword(strings.Repeat("x", MaxPasswordLen+1))
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, err = HashPassword(strings.Repeat("x", MaxPasswordLen))
	require.NoError(t, err)

	err = CheckPassword("not a bcrypt hash", "whatever1")
	require.Error(t, err)
	require.NotErrorIs(t, err, apperr.ErrUnauthenticated, "a broken stored hash is our fault, not the caller's")
}

// The rules count characters, as the API's schema does: 72 characters
// outside ASCII are a valid password although they take more bytes than
// bcrypt reads, and every one of those bytes still counts.
func TestPasswordsCountCharacters(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("密", MaxPasswordLen) // 216 bytes
	h, err := HashPassword(long)
	require.NoError(t, err, "72 characters are allowed whatever their bytes")
	require.NoError(t, CheckPassword(h, long))
	sameStart := strings.Repeat("密", MaxPasswordLen-1) + "码"
	require.ErrorIs(t, CheckPassword(h, sameStart), apperr.ErrUnauthenticated,
		"a password differing only after bcrypt's 72 bytes must not match")

	_, err = HashPassword(strings.Repeat("密", MaxPasswordLen+1))
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, err = HashPassword(strings.Repeat("é", 4)) // 8 bytes, 4 characters
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, err = HashPassword("bad\xffbytes")
	require.ErrorIs(t, err, apperr.ErrInvalidInput, "a password must be UTF-8")

	// A password of exactly 72 ASCII bytes is hashed as typed, so hashes
	// stored before long passwords were pre-hashed still match.
	ascii := strings.Repeat("a", MaxPasswordLen)
	old, err := bcrypt.GenerateFromPassword([]byte(ascii), bcrypt.MinCost)
	require.NoError(t, err)
	require.NoError(t, CheckPassword(string(old), ascii))
}

func TestValidateUsername(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"bob", "Ada_Lovelace.1815-x", strings.Repeat("a", 32)} {
		require.NoError(t, ValidateUsername(ok), ok)
	}
	for _, bad := range []string{"", "ab", strings.Repeat("a", 33), "bob smith", "bob@x", "bób", "a/b", "<script>"} {
		require.ErrorIs(t, ValidateUsername(bad), apperr.ErrInvalidInput, bad)
	}
}

func TestRegisterAndLogin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newMemUsers()
	tk := newTestTokens(t)
	acc := NewAccounts(store, tk)

	u, err := acc.Register(ctx, "alice", "wonderland")
	require.NoError(t, err)
	require.Positive(t, u.ID)
	require.Equal(t, "alice", u.Username)
	require.NotContains(t, u.PasswordHash, "wonderland")

	_, err = acc.Register(ctx, "alice", "otherpassword")
	require.ErrorIs(t, err, apperr.ErrUsernameTaken)
	_, err = acc.Register(ctx, "al", "wonderland")
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, err = acc.Register(ctx, "alice2", "short")
	require.ErrorIs(t, err, apperr.ErrInvalidInput)

	token, id, exp, err := acc.Login(ctx, "alice", "wonderland")
	require.NoError(t, err)
	require.Equal(t, u.ID, id)
	require.WithinDuration(t, time.Now().Add(time.Hour), exp, 5*time.Second)
	got, err := tk.Verify(token)
	require.NoError(t, err)
	require.Equal(t, u.ID, got)

	_, _, _, err = acc.Login(ctx, "alice", "wonderlanD")
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)
	wrongPassword := err.Error()

	// An unknown user costs one bcrypt comparison at the real cost, like a
	// wrong password (counted, not timed: the time is the machine's).
	var spent []string
	acc.spend = func(hash, password []byte) error {
		spent = append(spent, string(hash))
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	_, _, _, err = acc.Login(ctx, "nobody", "wonderland")
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)
	require.Equal(t, wrongPassword, err.Error(), "an unknown user and a wrong password must read the same")
	require.Equal(t, []string{dummyHash}, spent, "the dummy comparison ran")

	_, _, _, err = acc.Login(ctx, "", "")
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, _, _, err = acc.Login(ctx, "bad name!", "wonderland")
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)

	// A store failure is neither the caller's fault nor a wrong password.
	store.err = fmt.Errorf("%w: connection refused", apperr.ErrUnavailable)
	_, _, _, err = acc.Login(ctx, "alice", "wonderland")
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.NotErrorIs(t, err, apperr.ErrUnauthenticated)
}
