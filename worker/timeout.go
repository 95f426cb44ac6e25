package worker

import (
	"math"
	"time"
)

// jsTimeoutSeconds is the plugin's toTimeoutSeconds: whole seconds, at
// least 1, as the JavaScript number it computes (any size).
func jsTimeoutSeconds(ms float64) float64 {
	return math.Max(1, math.Ceil(ms/1000))
}

// maxTimeoutSeconds is the most seconds a time.Duration holds.
const maxTimeoutSeconds = int(math.MaxInt64 / int64(time.Second))

// timeoutSeconds is toTimeoutSeconds as an int for the waits that turn it
// into a Duration, saturating at the largest one rather than overflowing.
func timeoutSeconds(ms float64) int {
	secs := jsTimeoutSeconds(ms)
	if math.IsNaN(secs) || secs >= float64(maxTimeoutSeconds) {
		return maxTimeoutSeconds
	}
	return int(secs)
}
