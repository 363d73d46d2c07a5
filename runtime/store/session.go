package store

import (
	"context"
	"fmt"
	"time"
)

// RevokeSession records that the web console session id ended before its
// expiry (a sign-out): SessionRevoked answers true for it until expiry,
// when the record goes (the session is refused by then anyway). One SET.
func (s *Store) RevokeSession(ctx context.Context, id string, expiry time.Time) error {
	if id == "" {
		return fmt.Errorf("store: revoke session: empty id")
	}
	if !expiry.After(time.Now()) {
		return nil // ended anyway
	}
	if err := s.c.Do(ctx, s.c.B().Set().Key(s.k.revokedSession(id)).Value("1").Pxat(expiry).Build()).Error(); err != nil {
		return fmt.Errorf("store: revoke session: %w", err)
	}
	return nil
}

// SessionRevoked reports whether RevokeSession ended session id.
func (s *Store) SessionRevoked(ctx context.Context, id string) (bool, error) {
	n, err := s.c.Do(ctx, s.c.B().Exists().Key(s.k.revokedSession(id)).Build()).AsInt64()
	if err != nil {
		return false, fmt.Errorf("store: session revoked: %w", err)
	}
	return n > 0, nil
}
