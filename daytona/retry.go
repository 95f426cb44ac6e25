package daytona

import (
	"context"
	"time"
)

// RetryPolicy governs retries of idempotent reads (GET) after 429, 502, 503,
// 504 and connection failures, and of any request whose connection could not
// be dialled. Mutations that reached the server are never retried. Retries
// never outlast the caller's context: a wait that would end past its deadline
// is not started and the last error is returned instead.
type RetryPolicy struct {
	// MaxAttempts counts the first try; 1 disables retries. Default 4.
	MaxAttempts int
	// BaseDelay is the first back-off; it doubles per attempt. Default 250ms.
	BaseDelay time.Duration
	// MaxDelay caps the exponential back-off. Default 4s.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest server-requested delay (Retry-After) that
	// is honoured; a longer one ends the retries. Default 60s.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy returns the policy used for zero fields of Config.Retry.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxAttempts:   4,
		BaseDelay:     250 * time.Millisecond,
		MaxDelay:      4 * time.Second,
		MaxRetryAfter: 60 * time.Second,
	}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxAttempts > 0 {
		d.MaxAttempts = p.MaxAttempts
	}
	if p.BaseDelay > 0 {
		d.BaseDelay = p.BaseDelay
	}
	if p.MaxDelay > 0 {
		d.MaxDelay = p.MaxDelay
	}
	if p.MaxRetryAfter > 0 {
		d.MaxRetryAfter = p.MaxRetryAfter
	}
	return d
}

// backoffDelay is the jittered exponential delay before retry number
// attempt (1-based): half of the exponential step plus a random half.
func (p RetryPolicy) backoffDelay(attempt int, randf func() float64) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	return d/2 + time.Duration(randf()*float64(d/2))
}

// backoff waits before the next attempt and reports whether to make it.
// retryAfter, when positive, replaces the exponential delay.
func (c *Client) backoff(ctx context.Context, attempt int, retryAfter time.Duration) bool {
	if attempt >= c.retry.MaxAttempts {
		return false
	}
	delay := c.retry.backoffDelay(attempt, c.randf)
	if retryAfter > 0 {
		if retryAfter > c.retry.MaxRetryAfter {
			return false
		}
		delay = retryAfter
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= delay {
		return false
	}
	return c.clock.Sleep(ctx, delay) == nil
}
