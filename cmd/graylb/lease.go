package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The rollout lease: one rollout at a time on one rule document. It is a
// small JSON document beside the rules (a Nacos config with the rules'
// data id and ".rollout-lease", a Redis key with the rules' key and
// ":rollout-lease") naming its holder. The holder renews it every
// ttl/3; it expires ttl after its last renewal, by the expiry it states
// (a Redis key also carries a TTL of ttl+leaseLinger, so Redis drops a
// dead holder's lease itself). See docs/operations.md.

// leaseName is the rollout lease's item beside the rules.
const leaseName = "rollout-lease"

// defaultLeaseTTL is how long a lease outlives its holder's last renewal.
const defaultLeaseTTL = 30 * time.Second

// leaseLinger is how long past its expiry Redis keeps a lease key, so
// that the rollout taking it over can say whose it was.
const leaseLinger = 10 * time.Minute

// errLeaseHeld: another rollout holds the lease.
var errLeaseHeld = errors.New("another rollout is running on these rules")

// errLeaseLost: the lease was taken, removed or not renewed in time.
var errLeaseLost = errors.New("the rollout lost its lease")

// leaseRecord is what a lease holds.
type leaseRecord struct {
	Service string    `json:"service"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Token   string    `json:"token"` // this rollout's, random
	Started time.Time `json:"started"`
	Steps   []float64 `json:"steps"`
	Step    int       `json:"step"` // the step running, from 1; 0 before the first is written
	Canary  float64   `json:"canaryPercent"`
	// Shadow is the shadow phase's share while it runs (before step 1).
	Shadow  float64   `json:"shadowPercent,omitempty"`
	Renewed time.Time `json:"renewed"`
	Expires time.Time `json:"expires"`
}

// String names the holder and where its rollout is.
func (l leaseRecord) String() string {
	steps := make([]string, len(l.Steps))
	for i, s := range l.Steps {
		steps[i] = strconv.FormatFloat(s, 'f', -1, 64)
	}
	at := "before its first step"
	if l.Shadow > 0 {
		at = fmt.Sprintf("in its shadow phase (shadow %v%%)", l.Shadow)
	}
	if l.Step > 0 {
		at = fmt.Sprintf("at step %d/%d (canary %v%%)", l.Step, len(l.Steps), l.Canary)
	}
	return fmt.Sprintf("the rollout of %s by %s pid %d, started %s, steps %s%%, %s", printable(l.Service), printable(l.Host), l.PID,
		l.Started.UTC().Format(time.RFC3339), strings.Join(steps, ","), at)
}

// newLeaseRecord describes this process's rollout.
func newLeaseRecord(service string, steps []float64, now time.Time) leaseRecord {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	var tok [16]byte
	rand.Read(tok[:])
	return leaseRecord{Service: service, Host: host, PID: os.Getpid(), Token: hex.EncodeToString(tok[:]),
		Started: now.UTC(), Steps: steps}
}

// readLease reads the lease: ok false when there is none.
func readLease(ctx context.Context, item auxStore) (rec leaseRecord, d document, ok bool, err error) {
	if d, err = item.get(ctx); err != nil || !d.exists {
		return rec, d, false, err
	}
	if err := json.Unmarshal(d.data, &rec); err != nil || rec.Token == "" {
		return rec, d, false, fmt.Errorf("%s holds something that is not a rollout lease (%s): remove it by hand if no rollout runs", item.describe(), firstLine(string(d.data), 80))
	}
	return rec, d, true, nil
}

// lease is a lease this process holds.
type lease struct {
	item   auxStore
	ttl    time.Duration
	settle time.Duration

	mu      sync.Mutex
	rec     leaseRecord // what the next renewal writes
	renewed time.Time   // the last renewal that was read back
}

// acquireLease takes the lease for rec, or fails with errLeaseHeld naming
// its holder. A lease past its expiry is taken over; note says whose it
// was. The write is read back after the store's settle: of two rollouts
// that took it at once, the one whose record is not there gives up.
func acquireLease(ctx context.Context, st store, rec leaseRecord, ttl time.Duration) (_ *lease, note string, _ error) {
	l := &lease{item: st.aux(leaseName), ttl: ttl, settle: st.settle(), rec: rec}
	old, cur, ok, err := readLease(ctx, l.item)
	if err != nil {
		return nil, "", err
	}
	now := time.Now()
	if ok {
		if now.Before(old.Expires) {
			return nil, "", fmt.Errorf("%w: %s holds its lease (%s, renewed %s, expires %s unless renewed)", errLeaseHeld, old, l.item.describe(),
				old.Renewed.UTC().Format(time.RFC3339), old.Expires.UTC().Format(time.RFC3339))
		}
		note = fmt.Sprintf("taking over the lease of %s: it expired at %s, %s after its last renewal (its holder stopped renewing it)",
			old, old.Expires.UTC().Format(time.RFC3339), ttl)
	}
	if err := l.write(ctx, cur, now); err != nil {
		if errors.Is(err, errLeaseLost) || errors.Is(err, errConflict) {
			if other, _, ok, rerr := readLease(ctx, l.item); rerr == nil && ok {
				return nil, "", fmt.Errorf("%w: %s took the lease at the same time", errLeaseHeld, other)
			}
			return nil, "", fmt.Errorf("%w: another rollout wrote the lease at the same time", errLeaseHeld)
		}
		return nil, "", err
	}
	return l, note, nil
}

// write writes the record over prev and reads it back.
func (l *lease) write(ctx context.Context, prev document, now time.Time) error {
	l.mu.Lock()
	rec := l.rec
	l.mu.Unlock()
	rec.Renewed, rec.Expires = now.UTC(), now.Add(l.ttl).UTC()
	data, _ := json.Marshal(rec)
	if err := l.item.put(ctx, prev, data, l.ttl+leaseLinger); err != nil {
		return err
	}
	if err := sleepCtx(ctx, l.settle); err != nil {
		return err
	}
	back, _, ok, err := readLease(ctx, l.item)
	if err != nil {
		return err
	}
	if !ok || back.Token != rec.Token {
		return errLeaseLost
	}
	l.mu.Lock()
	l.renewed = now
	l.mu.Unlock()
	return nil
}

// at records the step running, for the next renewal.
func (l *lease) at(step int, canary float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec.Step, l.rec.Canary, l.rec.Shadow = step, canary, 0
}

// inShadow records that the rollout is in its shadow phase at share p.
func (l *lease) inShadow(p float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec.Shadow = p
}

// renew writes the lease again when it is still this rollout's.
func (l *lease) renew(ctx context.Context) error {
	cur, d, ok, err := readLease(ctx, l.item)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s was removed", errLeaseLost, l.item.describe())
	}
	if cur.Token != l.rec.Token {
		return fmt.Errorf("%w: %s holds it now", errLeaseLost, cur)
	}
	if err := l.write(ctx, d, time.Now()); err != nil {
		if errors.Is(err, errConflict) || errors.Is(err, errLeaseLost) {
			if other, _, ok, rerr := readLease(ctx, l.item); rerr == nil && ok && other.Token != l.rec.Token {
				return fmt.Errorf("%w: %s holds it now", errLeaseLost, other)
			}
			return fmt.Errorf("%w: someone else wrote it", errLeaseLost)
		}
		return err
	}
	return nil
}

// keep renews the lease every ttl/3 until ctx ends. A lost lease, or
// renewals failing until the lease expired, is sent on the channel
// returned (once); nudge asks for a renewal now (after a step is written,
// so that status shows it).
func (l *lease) keep(ctx context.Context) (lost <-chan error, nudge func(), wait func()) {
	ch := make(chan error, 1)
	poke := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(l.ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-poke:
			}
			err := l.renew(ctx)
			if err == nil || ctx.Err() != nil {
				continue
			}
			l.mu.Lock()
			last := l.renewed
			l.mu.Unlock()
			if errors.Is(err, errLeaseLost) || time.Since(last) >= l.ttl {
				if !errors.Is(err, errLeaseLost) {
					err = fmt.Errorf("%w: not renewed for %s (it expired): %v", errLeaseLost, l.ttl, err)
				}
				ch <- err
				return
			}
		}
	}()
	return ch, func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}, wg.Wait
}

// release removes the lease when it is still this rollout's.
func (l *lease) release(ctx context.Context) error {
	cur, d, ok, err := readLease(ctx, l.item)
	if err != nil || !ok || cur.Token != l.rec.Token {
		return err
	}
	return l.item.remove(ctx, d)
}
