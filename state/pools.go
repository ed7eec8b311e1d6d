package state

import (
	"context"
	"fmt"
	"time"
)

// UpsertPool inserts the pool, or replaces the provider, sizes and labels of
// the pool with the same name. now is recorded as updated_at (and created_at
// for a new pool). Errors: ErrInvalid for an empty name or provider, Min < 0,
// Max < Min or Capacity < 1.
func (s *Store) UpsertPool(ctx context.Context, p Pool, now time.Time) error {
	return s.write(ctx, func(tx *Tx) error { return tx.UpsertPool(p, now) })
}

// UpsertPool is Store.UpsertPool inside t.
func (t *Tx) UpsertPool(p Pool, now time.Time) error {
	switch {
	case p.Name == "":
		return invalidf("pool name is empty")
	case p.Provider == "":
		return invalidf("pool %q: provider is empty", p.Name)
	case p.Min < 0 || p.Max < p.Min:
		return invalidf("pool %q: need 0 <= min <= max, have min %d, max %d", p.Name, p.Min, p.Max)
	case p.Capacity < 1:
		return invalidf("pool %q: capacity must be at least 1, have %d", p.Name, p.Capacity)
	}
	_, err := t.ExecContext(t.ctx, `INSERT INTO pools (name, provider, min, max, capacity, labels, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET provider = excluded.provider, min = excluded.min,
			max = excluded.max, capacity = excluded.capacity, labels = excluded.labels,
			updated_at = excluded.updated_at`,
		p.Name, p.Provider, p.Min, p.Max, p.Capacity, encodeLabels(p.Labels), ms(now), ms(now))
	if err != nil {
		return fmt.Errorf("upsert pool %q: %w", p.Name, err)
	}
	return nil
}

func queryPools(ctx context.Context, tx *Tx) ([]Pool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, provider, min, max, capacity, labels FROM pools ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read pools: %w", err)
	}
	defer rows.Close()
	out := []Pool{}
	for rows.Next() {
		var p Pool
		var labels string
		if err := rows.Scan(&p.Name, &p.Provider, &p.Min, &p.Max, &p.Capacity, &labels); err != nil {
			return nil, fmt.Errorf("read pools: %w", err)
		}
		if p.Labels, err = decodeLabels(labels); err != nil {
			return nil, fmt.Errorf("pool %q: %w", p.Name, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}
